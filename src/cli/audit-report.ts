/** How an audit report reads on a terminal: a heading and a table per node, then one summary line. */
import type { AuditReport, AuditSummary, NodeReport } from '../audit/audit.js';
import { colour, print, status, table, plural } from './output.js';

function nodeTable(node: NodeReport): string {
  return table({
    head: ['check', 'status', 'actual', 'expected', 'advice'],
    rows: node.checks.map((c) => [c.id, status(c.status), c.actual, c.expected, c.message]),
    wrap: 4,
  });
}

export function summaryLine(summary: AuditSummary, nodes: number, code: number, strict: boolean): string {
  const counts = [
    colour.green(`${summary.pass} pass`),
    colour.yellow(`${summary.warn} warn`),
    colour.red(`${summary.fail} fail`),
    colour.magenta(`${summary.unknown} unknown`),
  ].join(', ');
  const verdict =
    code === 0
      ? colour.green('meets the durable baseline')
      : summary.fail > 0
        ? colour.red('below the durable baseline')
        : colour.yellow(`warnings present${strict ? ' (--strict)' : ''}`);
  return `${plural(nodes, 'node')}: ${counts} — ${verdict}`;
}

export function printAuditReport(report: AuditReport, code: number, strict: boolean): void {
  for (const node of report.nodes) {
    print(`${colour.bold(node.address)} ${colour.dim(`(${node.role})`)}`);
    print(nodeTable(node));
    print();
  }
  print(summaryLine(report.summary, report.nodes.length, code, strict));
}
