/** `glidemq retry <queue> <ids...> | --all-failed | --from-dead-letter`: failed jobs back to waiting; dead letters back to their source queue. */
import type { Command } from 'commander';
import { invalid } from '../../engine/shared/errors.js';
import { matchingIds, retryFailed, type JobFilter, type MoveResult } from '../../engine/operating/job-listing.js';
import { action, type CommandContext, withQueue } from '../context.js';
import { hangingWrap, print, printError, printJson, plural } from '../output.js';
import { describeFilter, filterFrom } from './jobs.js';
import { resendDeadLetters } from '../../engine/operating/dead-letters.js';

interface RetryFlags {
  allFailed?: boolean;
  since?: string;
  name?: string;
  dryRun?: boolean;
  fromDeadLetter?: boolean;
}

/** Ids shown in a text summary; --json lists them all. */
const SHOWN_IDS = 10;

/**
 * The ids to act on, or a usage error: ids or the --all flag (`all`), exactly one of the two; the
 * filters only with --all.
 */
export function checkSelection(ids: string[], all: boolean, allFlag: string, f: { since?: string; name?: string }, what: string): void {
  if (ids.length && all) throw invalid(`give job ids or ${allFlag}, not both`);
  if (!ids.length && !all) throw invalid(`give the ids of the jobs to ${what}, or ${allFlag}`);
  const filter = f.since !== undefined ? '--since' : f.name !== undefined ? '--name' : undefined;
  if (!all && filter) throw invalid(`${filter} selects jobs for ${allFlag}: use it with ${allFlag}, not with ids`);
}

/**
 * Prints what a retry or promote did: one summary line (or JSON) on stdout, each id that was not
 * moved on stderr. Exit 2 when an id names no job (bad input, as `job` and `remove` say), else 1
 * when any id was not moved (it is in another state).
 */
export function report(ctx: CommandContext, queue: string, r: MoveResult, o: { verb: string; past: string; key: string; noun: string; dryRun: boolean; filter?: JobFilter; since?: string }): number {
  if (ctx.json) {
    printJson({ queue, dryRun: o.dryRun, [o.key]: r.moved, problems: r.problems });
  } else if (o.filter && r.moved.length === 0 && r.problems.length === 0) {
    print(`${queue}: no ${describeFilter(o.filter, o.since)} to ${o.verb}`);
  } else {
    const ids = r.moved.length <= SHOWN_IDS ? r.moved.join(', ') : `${r.moved.slice(0, SHOWN_IDS).join(', ')}, … ${r.moved.length - SHOWN_IDS} more (--json lists them all)`;
    print(hangingWrap(`${queue}: ${o.dryRun ? `would ${o.verb}` : o.past} ${plural(r.moved.length, o.noun)}${r.moved.length ? ` (${ids})` : ''}`));
  }
  for (const p of r.problems) printError(p.reason);
  if (r.notFound?.length) return 2;
  return r.problems.length ? 1 : 0;
}

export function register(program: Command): void {
  program
    .command('retry <queue> [ids...]')
    .description('put failed jobs back to waiting: the ones named, or every failed one with --all-failed')
    .option('--all-failed', 'every failed job (narrowed by --since and --name)')
    .option('--since <duration>', 'with --all-failed: only jobs that failed within this long, e.g. 30m, 1h')
    .option('-n, --name <name>', 'with --all-failed: only jobs of this name')
    .option('--dry-run', 'list the jobs that would be retried, change nothing')
    .option('--from-dead-letter', '<queue> is a dead-letter queue: send its dead letters (the ids named, or every one) back to the queues they failed in')
    .addHelpText(
      'after',
      `
A retried job waits again where its options put it (its priority, LIFO or group) with all its
attempts again (attempts made back to 0); a paused queue keeps it until resumed. Only failed
jobs are retried: an id in another state is named on stderr and the command exits 1, an id that
does not exist exits 2 (the other ids are still retried). --since counts back from the server's
clock.

Examples:
  $ glidemq retry emails 42 43
  $ glidemq retry emails --all-failed --since 1h --dry-run
  $ glidemq retry emails --all-failed --name welcome --json
  $ glidemq retry emails-dlq --from-dead-letter --dry-run
  $ glidemq retry emails-dlq emails.42.1 --from-dead-letter --json

--from-dead-letter: each dead letter goes back to its source queue once: the source job, still
in its failed set, is retried there (all its attempts again); one that is back already is left;
one that is gone (its removeOnFail) is added again from the dead letter. The dead letter is then
removed from the dead-letter queue. --json adds "sent": [{id, queue, jobId, how}].`,
    )
    .action(
      action(async (ctx, queue: string, ids: string[], f: RetryFlags) => {
        if (f.fromDeadLetter) return retryDeadLetters(ctx, queue, ids, f);
        checkSelection(ids, !!f.allFailed, '--all-failed', f, 'retry');
        const filter = f.allFailed ? filterFrom('failed', f) : undefined;
        const r = await withQueue(ctx, queue, async (q) => retryFailed(q, filter ? await matchingIds(q, filter) : ids, { dryRun: f.dryRun }));
        return report(ctx, queue, r, { verb: 'retry', past: 'retried', key: 'retried', noun: 'failed job', dryRun: !!f.dryRun, filter, since: f.since });
      }),
    );
}

/** `retry <dlq> [ids...] --from-dead-letter`: dead letters back to their source queues. */
async function retryDeadLetters(ctx: CommandContext, queue: string, ids: string[], f: RetryFlags): Promise<number> {
  if (f.allFailed) throw invalid('--from-dead-letter sends every dead letter back when no ids are given: leave out --all-failed');
  const filter = f.since !== undefined ? '--since' : f.name !== undefined ? '--name' : undefined;
  if (filter) throw invalid(`${filter} is for --all-failed, not --from-dead-letter`);
  const r = await withQueue(ctx, queue, (q) => resendDeadLetters(q, ids.length ? ids : undefined, { dryRun: f.dryRun }));
  if (ctx.json) {
    printJson({ queue, dryRun: !!f.dryRun, retried: r.moved, sent: r.sent, problems: r.problems });
    for (const p of r.problems) printError(p.reason);
    if (r.notFound?.length) return 2; // as report(): an id that names no job
    return r.problems.length ? 1 : 0;
  }
  const code = report(ctx, queue, r, { verb: 'send back', past: 'sent back', key: 'retried', noun: 'dead letter', dryRun: !!f.dryRun });
  const where = [...new Set(r.sent.map((s) => s.queue))];
  if (r.sent.length && !f.dryRun) print(`  to ${where.join(', ')}`);
  return code;
}
