/** `glidemq reclaim <queue>`: stalled recovery now, exactly as a worker's scheduler runs it. */
import type { Command } from 'commander';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { action } from '../context.js';
import { existingQueue, withMaintenance } from '../maintenance.js';
import { colour, formatMs, notice, print, printJson, plural } from '../output.js';

interface ReclaimFlags {
  minIdle: string;
  maxStalledCount: string;
  dryRun?: boolean;
}

function jobs(n: number): string {
  return plural(n, 'job');
}

export function register(program: Command): void {
  program
    .command('reclaim <queue>')
    .description('run stalled recovery now: stream pending entries and claimed priority/LIFO/group jobs')
    .option('--min-idle <d>', 'the lock of a claim that carries none of its own (made by an older glidemq)', '30s')
    .option('--max-stalled-count <n>', 'the stalls a claim that carries no terms of its own may have before it fails', '1')
    .option('--dry-run', 'list the candidates and change nothing')
    .addHelpText(
      'after',
      `
Each claim is judged by the lock duration and maxStalledCount of the worker it was made for,
recorded with it: it is stalled once idle that long, whatever --min-idle says (which applies only
to claims that carry no terms, made by an older glidemq). A stalled job counts a stall and goes
back to the queue while its stall count is at most its maxStalledCount; past that it fails with
"job stalled more than maxStalledCount", as a failure of its processor would (its removeOnFail
applies). The worker that lost it can no longer finish it. Nothing is reclaimed while the queue is paused. Consumers that
hold nothing and have been idle for 5 minutes (10 x the default stalled interval) are removed.

Examples:
  $ glidemq reclaim emails --dry-run
  $ glidemq reclaim emails --min-idle 2m
  $ glidemq reclaim emails --max-stalled-count 3 --json`,
    )
    .action(
      action(async (ctx, queue: string, flags: ReclaimFlags) => {
        const minIdle = parseDuration(flags.minIdle, '--min-idle');
        const maxStalledCount = parseInteger(flags.maxStalledCount, '--max-stalled-count', 0, 1_000_000);
        const dryRun = !!flags.dryRun;
        const r = await withMaintenance(ctx, async (s) =>
          (await existingQueue(s, ctx, queue, { lockDuration: minIdle, maxStalledCount })).reclaim({ dryRun }),
        );
        if (r.paused) notice(`${queue} is paused: stalled recovery does not run while a queue is paused (glidemq resume ${queue})`);
        if (ctx.json) {
          printJson({ redispatched: r.redispatched, failed: r.failed, returned: r.returned, consumersRemoved: r.consumersRemoved });
          return 0;
        }
        if (r.paused) return 0;
        const would = dryRun ? 'would ' : '';
        if (r.redispatched.length + r.failed.length + r.returned.length + r.consumersRemoved === 0) {
          print(colour.dim(`nothing to reclaim in ${queue}: no claim idle past its own lock (${formatMs(minIdle)} for a claim that carries none)`));
        }
        if (r.redispatched.length > 0) {
          print(`${dryRun ? 'would redispatch' : 'redispatched'} ${jobs(r.redispatched.length)}: ${r.redispatched.join(' ')}`);
        }
        if (r.returned.length > 0) {
          print(`${dryRun ? 'would give back' : 'gave back'} ${jobs(r.returned.length)} a worker had claimed ahead and never started (no stall counted): ${r.returned.join(' ')}`);
        }
        if (r.failed.length > 0) {
          print(`${would}${dryRun ? 'fail' : colour.red('failed')} ${jobs(r.failed.length)} (stalled more than their maxStalledCount): ${r.failed.join(' ')}`);
        }
        if (r.consumersRemoved > 0) {
          print(`${dryRun ? 'would remove' : 'removed'} ${plural(r.consumersRemoved, 'idle consumer')} that held nothing`);
        }
        if (!dryRun && r.dropped > 0) print(colour.dim(`dropped ${r.dropped} pending entr${r.dropped === 1 ? 'y' : 'ies'} of removed or superseded jobs`));
        return 0;
      }),
    );
}
