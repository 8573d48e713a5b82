/** `glidemq pause <queue>` / `glidemq resume <queue>`: every delivery and reclaim path obeys it. */
import type { Command } from 'commander';
import { action, withQueue } from '../context.js';
import { print, printJson } from '../output.js';

export function register(program: Command): void {
  for (const verb of ['pause', 'resume'] as const) {
    program
      .command(`${verb} <queue>`)
      .description(verb === 'pause' ? 'stop workers from taking jobs of the queue (running jobs finish)' : 'let workers take jobs again')
      .addHelpText('after', `\nExamples:\n  $ glidemq ${verb} emails\n  $ glidemq ${verb} emails --json`)
      .action(
        action(async (ctx, queue: string) => {
          const changed = await withQueue(ctx, queue, (q) => (verb === 'pause' ? q.pause() : q.resume()));
          const state = verb === 'pause' ? 'paused' : 'running';
          if (ctx.json) printJson({ queue, state, changed });
          else print(changed ? `${queue}: ${state}` : `${queue}: already ${state}`);
          return 0;
        }),
      );
  }
}
