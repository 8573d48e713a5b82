/** `glidemq stats <queue>`: counts per state. */
import type { Command } from 'commander';
import { action, withQueue } from '../context.js';
import { colour, formatDuration, outputWidth, plural, print, printJson, printLines, table, wrapText } from '../output.js';
import { describeLimit } from './limit.js';

const STATES = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused', 'consumers'] as const;

export function register(program: Command): void {
  program
    .command('stats <queue>')
    .description('counts per state, the age of the oldest waiting job, the live workers and the global concurrency limit when one is set')
    .addHelpText(
      'after',
      `
The oldest waiting age is the queue's latency: how long the job that waited longest has been
waiting, by the server's clock (--json: oldestWaitingMs, null when none waits). Live workers come
from the worker registry (glidemq workers lists them); consumers from the stream's consumer group,
which keeps a dead worker's consumer until it is cleaned up.

Examples:
  $ glidemq stats emails
  $ glidemq stats emails --json | jq .waiting`,
    )
    .action(
      action(async (ctx, queue: string) => {
        const [counts, limit, oldest, workers] = await withQueue(ctx, queue, (q) =>
          Promise.all([q.getJobCounts(), q.getGlobalConcurrency(), q.getOldestWaitingAge(), q.getWorkers()]),
        );
        if (ctx.json) {
          printJson({ ...Object.fromEntries(STATES.map((s) => [s, counts[s]])), globalConcurrency: limit, oldestWaitingMs: oldest, workers: workers.length });
          return 0;
        }
        print(table({ head: ['state', 'jobs'], rows: STATES.map((s) => [s, counts[s]]), numeric: [1] }));
        print(`oldest waiting: ${oldest === null ? 'none waiting' : formatDuration(oldest)}`);
        const slots = workers.reduce((n, w) => n + w.concurrency, 0);
        print(`live workers: ${workers.length === 0 ? 'none' : `${plural(workers.length, 'worker')} (${plural(slots, 'slot')})`}`);
        if (counts.isPaused) printLines(wrapText(`queue ${queue} is paused: workers take no jobs until it is resumed`, outputWidth()).map((l) => colour.yellow(l)));
        // set by `worker --global-concurrency` or `glidemq limit`, it stays after the worker exits
        if (limit !== null) printLines(wrapText(`${describeLimit(limit)}; change or clear it with \`glidemq limit ${queue}\``, outputWidth()));
        return 0;
      }),
    );
}
