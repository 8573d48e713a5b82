/** `glidemq pause <queue>` / `glidemq resume <queue>`: every delivery and reclaim path obeys it. */
import type { Command } from 'commander';
import { action, withQueue } from '../context.js';
import { allowNewQueue, CREATE_FLAG, DECLINED } from '../confirm.js';
import { print, printJson } from '../output.js';

export function register(program: Command): void {
  for (const verb of ['pause', 'resume'] as const) {
    const cmd = program
      .command(`${verb} <queue>`)
      .description(verb === 'pause' ? 'stop workers from taking jobs of the queue (running jobs finish)' : 'let workers take jobs again');
    // pausing a queue that never existed makes it: a typo, unless --create says otherwise
    if (verb === 'pause') cmd.option(...CREATE_FLAG);
    const more = verb === 'pause' ? `\n  $ glidemq pause new-queue --create     paused before its first job` : '';
    cmd
      .addHelpText('after', `\nExamples:\n  $ glidemq ${verb} emails\n  $ glidemq ${verb} emails --json${more}`)
      .action(
        action(async (ctx, queue: string, f: { create?: boolean }) => {
          const changed = await withQueue(
            ctx,
            queue,
            async (q) => {
              if (verb === 'resume') return q.resume();
              return (await allowNewQueue(q, ctx, f.create)) ? q.pause() : undefined;
            },
            { creates: verb === 'pause' },
          );
          if (changed === undefined) return DECLINED;
          const state = verb === 'pause' ? 'paused' : 'running';
          if (ctx.json) printJson({ queue, state, changed });
          else print(changed ? `${queue}: ${state}` : `${queue}: already ${state}`);
          return 0;
        }),
      );
  }
}
