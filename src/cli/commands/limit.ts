/**
 * `glidemq limit <queue>`: the queue's global concurrency limit (at most n jobs active across all
 * its workers). `worker --global-concurrency n` stores it in the queue, where it stays after the
 * worker exits; this shows it, sets it and clears it.
 */
import type { Command } from 'commander';
import { parseInteger } from '../../engine/shared/duration.js';
import { invalid } from '../../engine/shared/errors.js';
import { action, withQueue } from '../context.js';
import { allowNewQueue, CREATE_FLAG, DECLINED } from '../confirm.js';
import { print, printJson } from '../output.js';

interface LimitFlags {
  globalConcurrency?: string;
  clear?: boolean;
  create?: boolean;
}

export function describeLimit(limit: number | null): string {
  return limit === null ? 'no global concurrency limit' : `global concurrency ${limit} (at most ${limit} active at once across all workers)`;
}

export function register(program: Command): void {
  program
    .command('limit <queue>')
    .description("show, set or clear the queue's global concurrency limit (it outlives the worker that set it)")
    .option('--global-concurrency <n>', 'allow at most n active jobs across all workers of the queue')
    .option('--clear', 'remove the limit')
    .option(...CREATE_FLAG)
    .addHelpText(
      'after',
      `
Without a flag the command shows the limit. \`glidemq stats\` shows it too.

Examples:
  $ glidemq limit emails
  $ glidemq limit emails --global-concurrency 20
  $ glidemq limit emails --clear --json
  $ glidemq limit new-queue --global-concurrency 5 --create`,
    )
    .action(
      action(async (ctx, queue: string, f: LimitFlags) => {
        if (f.clear && f.globalConcurrency !== undefined) throw invalid('give either --global-concurrency <n> or --clear, not both');
        const wanted = f.clear ? 0 : f.globalConcurrency === undefined ? undefined : parseInteger(f.globalConcurrency, '--global-concurrency', 1, 1_000_000);
        // a read warns about a queue that does not exist; a setting would make it (allowNewQueue)
        const outcome = await withQueue(
          ctx,
          queue,
          async (q) => {
            const was = await q.getGlobalConcurrency();
            if (wanted === undefined) return { before: was, after: was };
            if (!(await allowNewQueue(q, ctx, f.create))) return undefined;
            await q.setGlobalConcurrency(wanted);
            return { before: was, after: await q.getGlobalConcurrency() };
          },
          { creates: wanted !== undefined },
        );
        if (!outcome) return DECLINED;
        const { before, after } = outcome;
        if (ctx.json) printJson({ queue, globalConcurrency: after, changed: before !== after });
        else if (wanted === undefined) print(`${queue}: ${describeLimit(after)}`);
        else if (before === after) print(`${queue}: unchanged, ${describeLimit(after)}`);
        else print(`${queue}: ${describeLimit(after)}${before === null ? '' : ` (was ${before})`}`);
        return 0;
      }),
    );
}
