/**
 * `--confirm fsync|replicas=N|fsync,replicas=N [--confirm-timeout 2s]` (enqueue, worker, publish):
 * the engine's confirm option (README "Confirmed writes") from the command line. A bad value is a
 * usage error: one line, exit 2.
 */
import { parseDuration, parseInteger } from '../engine/shared/duration.js';
import { ConfirmTimeoutError, invalid } from '../engine/shared/errors.js';
import { printError } from './output.js';
import { checkConfirm, type ConfirmOptions } from '../engine/producing/confirm.js';

export interface ConfirmFlags {
  confirm?: string;
  confirmTimeout?: string;
}

export const CONFIRM_FLAG = ['--confirm <what>', 'confirm each write before it counts: fsync (WAITAOF on the primary), replicas=N (WAIT for N replicas), or fsync,replicas=N'] as const;
export const CONFIRM_TIMEOUT_FLAG = ['--confirm-timeout <d>', 'with --confirm: how long to wait for the confirmation (default: 5s)'] as const;

/** The confirm option the flags ask for, or undefined (no --confirm). */
export function confirmFromFlags(f: ConfirmFlags): ConfirmOptions | undefined {
  if (f.confirm === undefined) {
    if (f.confirmTimeout !== undefined) throw invalid('--confirm-timeout needs --confirm');
    return undefined;
  }
  const out: ConfirmOptions = {};
  for (const part of f.confirm.split(',').map((p) => p.trim())) {
    if (part === 'fsync' && out.fsync === undefined) out.fsync = true;
    else if (part.startsWith('replicas=') && out.replicas === undefined) out.replicas = parseInteger(part.slice('replicas='.length), '--confirm replicas', 1, 64);
    else throw invalid(`--confirm must be fsync, replicas=N or fsync,replicas=N, got "${f.confirm}"`);
  }
  if (f.confirmTimeout !== undefined) {
    out.timeout = parseDuration(f.confirmTimeout, '--confirm-timeout');
    if (out.timeout < 1) throw invalid('--confirm-timeout must be at least 1ms');
  }
  checkConfirm(out, '--confirm');
  return out;
}

/**
 * Runs a command's confirmed writes: a confirmation that did not hold is the command finding a
 * problem (CLI.md: exit 1), said in one line (what was reached, and that a retry is safe).
 */
export async function exitOneOnConfirmTimeout(body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (err) {
    if (!(err instanceof ConfirmTimeoutError)) throw err;
    printError(err.message.replace(/ \(err\.retry\(\), or the same call with the same jobId\)$/, ' (run the same command again; with --job-id it adds nothing twice)'));
    return 1;
  }
}
