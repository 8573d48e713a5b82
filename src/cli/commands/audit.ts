/** `glidemq audit`: the durability auditor (src/audit) against the server or cluster in --url. */
import type { Command } from 'commander';
import { exitCodeFor, runAudit } from '../../audit/audit.js';
import { LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION } from '../../engine/connecting/library.js';
import { printAuditReport } from '../audit-report.js';
import { action } from '../context.js';
import { printJson, spinner } from '../output.js';

export function register(program: Command): void {
  program
    .command('audit')
    .description("check every node's durability settings against the recommended baseline")
    .option('--strict', 'exit 1 on warnings too, not only on failures')
    .addHelpText(
      'after',
      `
Exit codes: 0 nothing fails, 1 a check fails (or warns, with --strict), 2 no node could be reached.

Examples:
  $ glidemq audit                                   the server at $GLIDEMQ_URL or 127.0.0.1:6379
  $ glidemq audit -u redis://:secret@db:6379 --strict
  $ glidemq audit --cluster -u redis://10.0.0.5:7000  every primary and replica
  $ glidemq audit --json | jq '.nodes[].checks[] | select(.status != "pass")'`,
    )
    .action(
      action(async (ctx) => {
        const strict = !!(ctx.globals as { strict?: boolean }).strict;
        const sp = ctx.json ? undefined : spinner(`auditing ${ctx.where}`);
        let report;
        try {
          report = await runAudit(ctx.connection, { expectedLibraryVersion: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION });
        } finally {
          sp?.stop();
        }
        const code = exitCodeFor(report, strict);
        if (ctx.json) printJson(report);
        else printAuditReport(report, code, strict);
        return code;
      }),
    );
}
