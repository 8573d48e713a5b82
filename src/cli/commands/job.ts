/** `glidemq job <queue> <id>`: one job's full state. */
import type { Command } from 'commander';
import { JobNotFoundError } from '../../engine/shared/errors.js';
import { action, withQueue } from '../context.js';
import { colour, ellipsis, formatDuration, formatTime, jobJson, outputWidth, print, printJson, status, table, wrapText } from '../output.js';

function show(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}

/** At most this many lines of the failure's stack are shown (the top: where it was thrown). */
const STACK_LINES = 12;

/**
 * The stack of the last failed attempt, bounded: the engine keeps one per failed attempt
 * (job.stacktrace, oldest first), when the processor threw an Error.
 */
function lastStack(job: { stacktrace?: unknown }): string[] {
  const stacks = Array.isArray(job.stacktrace) ? job.stacktrace.filter((s): s is string => typeof s === 'string' && s !== '') : [];
  if (stacks.length === 0) return [];
  const lines = stacks[stacks.length - 1].split('\n');
  const shown = lines.slice(0, STACK_LINES);
  if (lines.length > STACK_LINES) shown.push(`... ${lines.length - STACK_LINES} more lines (--json has them all)`);
  return shown;
}

export function register(program: Command): void {
  program
    .command('job <queue> <id>')
    .description("one job's full state: data, attempts, stalls, return value, failure reason, logs")
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq job emails 42
  $ glidemq job emails 42 --json | jq .returnvalue`,
    )
    .action(
      action(async (ctx, queue: string, id: string) => {
        const found = await withQueue(ctx, queue, async (q) => {
          const job = await q.getJob(id);
          return job ? { job, logs: (await q.getJobLogs(id)).logs } : undefined;
        });
        if (!found) throw new JobNotFoundError('ERR_JOB_NOT_FOUND', `job ${id} not found in queue ${queue} (finished jobs may have been removed by retention)`, true);
        const { job, logs } = found;
        if (ctx.json) {
          const { stacktrace } = job as { stacktrace?: unknown };
          printJson({ ...jobJson(job), ...(Array.isArray(stacktrace) ? { stacktrace } : {}), logs });
          return 0;
        }
        const rows: [string, string][] = [
          ['id', job.id],
          ['name', job.name],
          ['state', status(job.state)],
          ['data', show(job.data)],
          ['attempts', `${job.attemptsMade} of ${job.opts.attempts}`],
          ['stalled', String(job.stalledCount)],
          ['progress', show(job.progress)],
          ['added', formatTime(job.timestamp)],
          ['processed', formatTime(job.processedOn)],
          ['finished', formatTime(job.finishedOn)],
        ];
        if (job.opts.priority) rows.push(['priority', String(job.opts.priority)]);
        if (job.opts.lifo) rows.push(['lifo', 'yes']);
        if (job.opts.delay) rows.push(['delay', formatDuration(job.opts.delay)]);
        if (job.returnvalue !== null) rows.push(['returnvalue', show(job.returnvalue)]);
        if (job.failedReason) rows.push(['failedReason', job.failedReason]);
        print(table({ head: ['field', 'value'], rows, wrap: 1 }));
        const width = outputWidth();
        const stack = lastStack(job as { stacktrace?: unknown });
        if (stack.length) {
          print('stack (last failed attempt):');
          for (const l of stack) print(colour.dim(`  ${ellipsis(l.trim(), width - 4).replace(/^at /, '  at ')}`));
        }
        if (logs.length) {
          print(logs.length > 20 ? `logs (last 20 of ${logs.length}):` : 'logs:');
          for (const l of logs.slice(-20)) wrapText(l, width - 4).forEach((part, i) => print(`${i ? '    ' : '  '}${part}`));
        }
        return 0;
      }),
    );
}
