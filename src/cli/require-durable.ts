/**
 * `worker --require-durable`: the worker starts only when `glidemq audit` finds every node at the
 * durable baseline (no failing check); otherwise one line names the failing checks and the command
 * exits 1 (CLI.md).
 */
import { runAudit } from '../audit/audit.js';
import type { ClientSettings } from '../engine/connecting/connection.js';
import { LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION } from '../engine/connecting/library.js';
import { printError } from './output.js';

/** True when the server is at the baseline; else says which checks fail, and false. */
export async function durableBaselineHolds(connection: ClientSettings): Promise<boolean> {
  const report = await runAudit(connection, { expectedLibraryVersion: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION });
  const failing = report.nodes.flatMap((n) => n.checks.filter((c) => c.status === 'fail').map((c) => `${n.address} ${c.id} (${c.actual})`));
  if (failing.length === 0) return true;
  printError(`--require-durable: the server is below the durable baseline (glidemq audit): ${failing.join('; ')}`);
  return false;
}
