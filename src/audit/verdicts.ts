/**
 * The audit's verdict per node, as the exporter publishes it (glidemq_durable_writes): a node
 * keeps acknowledged writes durable when none of its checks fails (durableVerdict, the baseline
 * `worker --require-durable` asks for; an unreachable node fails its `reachable` check).
 */
import { durableVerdict } from './checks/confirmed-writes.js';
import type { AuditReport } from './types.js';

export interface NodeVerdict {
  /** host:port as the audit names it. */
  node: string;
  role: string;
  durable: boolean;
}

export function verdictsByNode(report: AuditReport): NodeVerdict[] {
  return report.nodes.map((n) => ({ node: n.address, role: n.role, durable: durableVerdict(n.checks) }));
}
