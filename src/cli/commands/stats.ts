/** `glidemq stats <queue>`: counts per state. */
import type { Command } from 'commander';
import { action, withQueue } from '../context.js';
import { colour, print, printJson, table } from '../output.js';
import { describeLimit } from './limit.js';

const STATES = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused', 'consumers'] as const;

export function register(program: Command): void {
  program
    .command('stats <queue>')
    .description('counts per state: waiting, active, delayed, prioritized, completed, failed, paused, consumers; and the global concurrency limit when one is set')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq stats emails
  $ glidemq stats emails --json | jq .waiting`,
    )
    .action(
      action(async (ctx, queue: string) => {
        const [counts, limit] = await withQueue(ctx, queue, (q) => Promise.all([q.getJobCounts(), q.getGlobalConcurrency()]));
        if (ctx.json) {
          printJson({ ...Object.fromEntries(STATES.map((s) => [s, counts[s]])), globalConcurrency: limit });
          return 0;
        }
        print(table({ head: ['state', 'jobs'], rows: STATES.map((s) => [s, counts[s]]), numeric: [1] }));
        if (counts.isPaused) print(colour.yellow(`queue ${queue} is paused: workers take no jobs until it is resumed`));
        // set by `worker --global-concurrency` or `glidemq limit`, it stays after the worker exits
        if (limit !== null) print(`${describeLimit(limit)}; change or clear it with \`glidemq limit ${queue}\``);
        return 0;
      }),
    );
}
