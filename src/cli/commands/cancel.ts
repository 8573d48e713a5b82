/** `glidemq cancel <queue> <id...>`: revoke jobs (queue.revoke), from any machine. */
import type { Command } from 'commander';
import type { RevokeResult } from '../../engine/administering/revoke.js';
import { action, withQueue } from '../context.js';
import { confirmDestructive, DECLINED } from '../confirm.js';
import { print, printError, printJson, plural } from '../output.js';

interface CancelFlags {
  yes?: boolean;
  dryRun?: boolean;
}

/** What cancel did (or, with --dry-run, would do) to each id, by answer. */
interface Outcome {
  revoked: string[];
  flagged: string[];
  finished: string[];
  notFound: string[];
}

function sortOut(ids: string[], answers: RevokeResult[]): Outcome {
  const out: Outcome = { revoked: [], flagged: [], finished: [], notFound: [] };
  const into = { revoked: out.revoked, flagged: out.flagged, finished: out.finished, not_found: out.notFound };
  ids.forEach((id, i) => into[answers[i]].push(id));
  return out;
}

function summary(queue: string, o: Outcome, dryRun: boolean): string {
  const parts: string[] = [];
  if (o.revoked.length) parts.push(`${dryRun ? 'would revoke' : 'revoked'} ${plural(o.revoked.length, 'job')} (${o.revoked.join(', ')}): never to run`);
  if (o.flagged.length) {
    parts.push(`${dryRun ? 'would flag' : 'flagged'} ${plural(o.flagged.length, 'running job')} (${o.flagged.join(', ')}): its worker aborts it at its next lock renewal`);
  }
  if (!parts.length) parts.push(dryRun ? 'would cancel nothing' : 'cancelled nothing');
  return `${queue}: ${parts.join('; ')}`;
}

export function register(program: Command): void {
  program
    .command('cancel <queue> <ids...>')
    .description('revoke jobs: a waiting or delayed job never runs, a running one is aborted through its signal')
    .option('--dry-run', 'say what each job would get, change nothing')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText(
      'after',
      `
A job that has not started (waiting, prioritized, delayed, in its group's line, or a parent
waiting for its children) never runs: it fails for good with the reason "revoked", whatever
attempts it has left. A running job is flagged on the server: the worker that runs it, on any
machine, aborts its AbortSignal with the reason "revoked" at its next lock renewal (a worker that
is offline obeys when it is back); if its processor then fails, the job fails for good as
revoked, and if it completes anyway, the completion stands. A job that already finished is left
as it was and named on stderr (exit 1); an id not found is named on stderr (exit 2). Cancelling
a job again answers the same. Without a terminal the command refuses unless --yes is given.

Examples:
  $ glidemq cancel emails 42 43 --dry-run
  $ glidemq cancel emails 42 --yes --json`,
    )
    .action(
      action(async (ctx, queue: string, ids: string[], f: CancelFlags) => {
        const dryRun = !!f.dryRun;
        const outcome = await withQueue(ctx, queue, async (q) => {
          if (!dryRun && !(await confirmDestructive(`cancel ${plural(ids.length, 'job')} of ${queue}`, f.yes))) return undefined;
          const answers: RevokeResult[] = [];
          for (const id of ids) answers.push(await q.revoke(id, { dryRun }));
          return sortOut(ids, answers);
        });
        if (!outcome) return DECLINED;
        if (ctx.json) printJson({ queue, dryRun, ...outcome });
        else print(summary(queue, outcome, dryRun));
        if (outcome.finished.length) printError(`finished before, left as they were: ${outcome.finished.join(', ')}`);
        if (outcome.notFound.length) printError(`not found in queue ${queue}: ${outcome.notFound.join(', ')} (finished jobs may have been removed by retention)`);
        return outcome.notFound.length ? 2 : outcome.finished.length ? 1 : 0;
      }),
    );
}
