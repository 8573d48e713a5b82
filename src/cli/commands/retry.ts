/** `glidemq retry <queue> <ids...> | --all-failed`: failed jobs back to waiting. */
import type { Command } from 'commander';
import { invalid } from '../../engine/shared/errors.js';
import { matchingIds, retryFailed, type JobFilter, type MoveResult } from '../../engine/operating/job-listing.js';
import { action, type CommandContext, withQueue } from '../context.js';
import { print, printError, printJson, plural } from '../output.js';
import { describeFilter, filterFrom } from './jobs.js';

interface RetryFlags {
  allFailed?: boolean;
  since?: string;
  name?: string;
  dryRun?: boolean;
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
 * moved on stderr. Exit 1 when any id was not moved.
 */
export function report(ctx: CommandContext, queue: string, r: MoveResult, o: { verb: string; past: string; key: string; noun: string; dryRun: boolean; filter?: JobFilter; since?: string }): number {
  if (ctx.json) {
    printJson({ queue, dryRun: o.dryRun, [o.key]: r.moved, problems: r.problems });
  } else if (o.filter && r.moved.length === 0 && r.problems.length === 0) {
    print(`${queue}: no ${describeFilter(o.filter, o.since)} to ${o.verb}`);
  } else {
    const ids = r.moved.length <= SHOWN_IDS ? r.moved.join(', ') : `${r.moved.slice(0, SHOWN_IDS).join(', ')}, … ${r.moved.length - SHOWN_IDS} more (--json lists them all)`;
    print(`${queue}: ${o.dryRun ? `would ${o.verb}` : o.past} ${plural(r.moved.length, o.noun)}${r.moved.length ? ` (${ids})` : ''}`);
  }
  for (const p of r.problems) printError(p.reason);
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
    .addHelpText(
      'after',
      `
A retried job waits again where its options put it (its priority, LIFO or group) with all its
attempts again (attempts made back to 0); a paused queue keeps it until resumed. Only failed jobs are retried: an id
that does not exist or is in another state is named on stderr and the command exits 1 (the
other ids are still retried). --since counts back from the server's clock.

Examples:
  $ glidemq retry emails 42 43
  $ glidemq retry emails --all-failed --since 1h --dry-run
  $ glidemq retry emails --all-failed --name welcome --json`,
    )
    .action(
      action(async (ctx, queue: string, ids: string[], f: RetryFlags) => {
        checkSelection(ids, !!f.allFailed, '--all-failed', f, 'retry');
        const filter = f.allFailed ? filterFrom('failed', f) : undefined;
        const r = await withQueue(ctx, queue, async (q) => retryFailed(q, filter ? await matchingIds(q, filter) : ids, { dryRun: f.dryRun }));
        return report(ctx, queue, r, { verb: 'retry', past: 'retried', key: 'retried', noun: 'failed job', dryRun: !!f.dryRun, filter, since: f.since });
      }),
    );
}
