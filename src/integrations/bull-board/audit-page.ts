/**
 * The durability audit (src/audit) as the dashboard shows it: one small HTML page, every node's
 * checks with their verdict, what the node has, what the baseline wants and what to change.
 */
import type { AuditReport, CheckStatus } from '../../audit/audit.js';

const COLOURS: Record<CheckStatus, string> = { pass: '#1a7f37', warn: '#9a6700', fail: '#cf222e', unknown: '#57606a' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The report as a page; `where` names the server (its URL without a password). */
export function auditPage(report: AuditReport, where: string): string {
  const { pass, warn, fail, unknown } = report.summary;
  const nodes = report.nodes
    .map((node) => {
      const rows = node.checks
        .map(
          (c) =>
            `<tr><td>${escapeHtml(c.id)}</td><td class="verdict" style="color:${COLOURS[c.status]}">${c.status}</td>` +
            `<td>${escapeHtml(c.actual)}</td><td>${escapeHtml(c.expected)}</td><td>${escapeHtml(c.message)}</td></tr>`,
        )
        .join('\n');
      return (
        `<h2>${escapeHtml(node.address)} <small>(${escapeHtml(node.role)})</small></h2>\n` +
        `<table><thead><tr><th>check</th><th>verdict</th><th>has</th><th>wants</th><th>what to do</th></tr></thead>\n<tbody>\n${rows}\n</tbody></table>`
      );
    })
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>glidemq durability audit</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2rem; color: #1f2328; }
table { border-collapse: collapse; width: 100%; margin-bottom: 2rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #d0d7de; vertical-align: top; }
.verdict { font-weight: 600; }
</style></head><body>
<p><a href="./">&larr; queues</a></p>
<h1>Durability audit of ${escapeHtml(where)}</h1>
<p id="summary">${pass} pass, ${warn} warn, ${fail} fail, ${unknown} unknown (as <code>glidemq audit</code>)</p>
${nodes}
</body></html>
`;
}
