/**
 * How an audit report reads on a terminal: per node a heading, then one line per check (status,
 * check, actual value), the failures and warnings first with their advice wrapped beneath them
 * (a passing check needs none), and the verdict as the last line. Every line fits outputWidth().
 */
import type { AuditReport, AuditSummary, Check, NodeReport } from '../audit/audit.js';
import { colour, ellipsis, outputWidth, plural, print, status, wrapText } from './output.js';

/** Problems first: what fails, then what warns, then what could not be told, then what passes. */
const ORDER: Record<Check['status'], number> = { fail: 0, warn: 1, unknown: 2, pass: 3 };
const STATUS_WIDTH = 7; // "unknown"
const INDENT = '  ';

/** The lines of one node's checks, fitted to `width`. */
export function checkLines(node: NodeReport, width: number): string[] {
  const checks = [...node.checks].sort((a, b) => ORDER[a.status] - ORDER[b.status]); // stable: the auditor's order within a status
  // the check column as wide as its longest id, but leaving the actual value at least 16 columns
  const idWidth = Math.min(Math.max(...checks.map((c) => c.id.length)), Math.max(8, width - INDENT.length - STATUS_WIDTH - 4 - 16));
  const actualWidth = Math.max(8, width - INDENT.length - STATUS_WIDTH - 2 - idWidth - 2);
  const adviceIndent = ' '.repeat(INDENT.length + STATUS_WIDTH + 2);
  const lines: string[] = [];
  for (const c of checks) {
    const word = status(c.status) + ' '.repeat(STATUS_WIDTH - c.status.length);
    const id = ellipsis(c.id, idWidth).padEnd(idWidth);
    lines.push(`${INDENT}${word}  ${id}  ${ellipsis(c.actual, actualWidth)}`.trimEnd());
    if (c.status === 'fail' || c.status === 'warn') {
      const advice = `${c.message} (expected: ${c.expected})`;
      for (const l of wrapText(advice, width - adviceIndent.length)) lines.push(adviceIndent + colour.dim(l));
    }
  }
  return lines;
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
  const width = outputWidth();
  // nodes with problems first too: on a cluster the one to fix should not scroll away
  const worst = (n: NodeReport) => Math.min(...n.checks.map((c) => ORDER[c.status]));
  const nodes = [...report.nodes].sort((a, b) => worst(a) - worst(b));
  for (const node of nodes) {
    print(`${colour.bold(ellipsis(node.address, width - node.role.length - 3))} ${colour.dim(`(${node.role})`)}`);
    for (const line of checkLines(node, width)) print(line);
    print();
  }
  print(summaryLine(report.summary, report.nodes.length, code, strict));
}
