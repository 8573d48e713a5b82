/** `glidemq promote <queue> <ids...> | --all`: delayed jobs to waiting now. */
import type { Command } from 'commander';
import { matchingIds, promoteDelayed } from '../../engine/operating/job-listing.js';
import { action, withQueue } from '../context.js';
import { checkSelection, report } from './retry.js';
import { filterFrom } from './jobs.js';

interface PromoteFlags {
  all?: boolean;
  name?: string;
  dryRun?: boolean;
}

export function register(program: Command): void {
  program
    .command('promote <queue> [ids...]')
    .description('run delayed jobs now: the ones named, or every delayed one with --all')
    .option('--all', 'every delayed job (narrowed by --name)')
    .option('-n, --name <name>', 'with --all: only jobs of this name')
    .option('--dry-run', 'list the jobs that would be promoted, change nothing')
    .addHelpText(
      'after',
      `
A promoted job waits where its options put it (its priority, LIFO or group), as if its delay
had ended; a retry waiting out its backoff is a delayed job too. Only delayed jobs are promoted:
an id in another state is named on stderr and the command exits 1, an id that does not exist
exits 2 (the other ids are still promoted). --all acts on the delayed jobs there are when it
starts.

Examples:
  $ glidemq promote emails 42
  $ glidemq promote emails --all --dry-run
  $ glidemq promote emails --all --name digest --json`,
    )
    .action(
      action(async (ctx, queue: string, ids: string[], f: PromoteFlags) => {
        checkSelection(ids, !!f.all, '--all', { name: f.name }, 'promote');
        const filter = f.all ? filterFrom('delayed', f) : undefined;
        const r = await withQueue(ctx, queue, async (q) => promoteDelayed(q, filter ? await matchingIds(q, filter) : ids, { dryRun: f.dryRun }));
        return report(ctx, queue, r, { verb: 'promote', past: 'promoted', key: 'promoted', noun: 'delayed job', dryRun: !!f.dryRun, filter });
      }),
    );
}
