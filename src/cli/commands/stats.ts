/** `glidemq stats <queue>`: counts per state. */
import type { Command } from 'commander';
import { action, withQueue } from '../context.js';
import { colour, print, printJson, table } from '../output.js';

const STATES = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused', 'consumers'] as const;

export function register(program: Command): void {
  program
    .command('stats <queue>')
    .description('counts per state: waiting, active, delayed, prioritized, completed, failed, paused, consumers')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq stats emails
  $ glidemq stats emails --json | jq .waiting`,
    )
    .action(
      action(async (ctx, queue: string) => {
        const counts = await withQueue(ctx, queue, (q) => q.getJobCounts());
        if (ctx.json) {
          printJson(Object.fromEntries(STATES.map((s) => [s, counts[s]])));
          return 0;
        }
        print(table({ head: ['state', 'jobs'], rows: STATES.map((s) => [s, counts[s]]), numeric: [1] }));
        if (counts.isPaused) print(colour.yellow(`queue ${queue} is paused: workers take no jobs until it is resumed`));
        return 0;
      }),
    );
}
