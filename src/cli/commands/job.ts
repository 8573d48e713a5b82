/** `glidemq job <queue> <id>`: one job's full state. */
import type { Command } from 'commander';
import { JobNotFoundError } from '../../engine/shared/errors.js';
import { action, withQueue } from '../context.js';
import { dependencyCounts, describeCounts, parentOf, totalOf } from '../flow-view.js';
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
    .description("one job's full state: data, attempts, stalls, return value, failure reason, logs, and its parent and children in a flow")
    .addHelpText(
      'after',
      `
A job of a flow shows its parent (its id and queue) and, when it has children, how they
settled: processed, unprocessed, failed, ignored (glidemq flow shows the tree). --json has
them as "parent" ({id, queue}, or null) and "dependencies" ({processed, unprocessed, ignored,
failed}, or null for a job without children).

Examples:
  $ glidemq job emails 42
  $ glidemq job emails 42 --json | jq .returnvalue
  $ glidemq job reports renovate-1 --json | jq .dependencies`,
    )
    .action(
      action(async (ctx, queue: string, id: string) => {
        const found = await withQueue(ctx, queue, async (q) => {
          const job = await q.getJob(id);
          if (!job) return undefined;
          const [logs, dependencies] = await Promise.all([q.getJobLogs(id), dependencyCounts(job)]);
          return { job, logs: logs.logs, dependencies };
        });
        if (!found) throw new JobNotFoundError('ERR_JOB_NOT_FOUND', `job ${id} not found in queue ${queue} (finished jobs may have been removed by retention)`, true);
        const { job, logs, dependencies } = found;
        const parent = parentOf(job);
        const isParent = totalOf(dependencies) > 0;
        if (ctx.json) {
          const { stacktrace } = job as { stacktrace?: unknown };
          // a flow's links: null for a job that is no child, and for one that has no children
          printJson({ ...jobJson(job), ...(Array.isArray(stacktrace) ? { stacktrace } : {}), parent, dependencies: isParent ? dependencies : null, logs });
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
        if (job.originalQueue) rows.push(['dead letter of', `job ${job.originalJobId} in queue ${job.originalQueue}`]);
        if (parent) rows.push(['parent', `${parent.id} in queue ${parent.queue}`]);
        if (isParent) rows.push(['children', describeCounts(dependencies)]);
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
