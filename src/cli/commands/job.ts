/** `glidemq job <queue> <id>`: one job's full state. */
import type { Command } from 'commander';
import { JobNotFoundError } from '../../engine/errors.js';
import { action, withQueue } from '../context.js';
import { print, printJson, status, table } from '../output.js';

function show(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}

function time(ms: number | null): string {
  return ms ? new Date(ms).toISOString() : '';
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
          printJson({ ...job.toJSON(), logs });
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
          ['added', time(job.timestamp)],
          ['processed', time(job.processedOn)],
          ['finished', time(job.finishedOn)],
        ];
        if (job.opts.priority) rows.push(['priority', String(job.opts.priority)]);
        if (job.opts.lifo) rows.push(['lifo', 'yes']);
        if (job.opts.delay) rows.push(['delay', `${job.opts.delay} ms`]);
        if (job.returnvalue !== null) rows.push(['returnvalue', show(job.returnvalue)]);
        if (job.failedReason) rows.push(['failedReason', job.failedReason]);
        print(table({ head: ['field', 'value'], rows }));
        if (logs.length) {
          print('logs:');
          for (const l of logs.slice(-20)) print(`  ${l}`);
        }
        return 0;
      }),
    );
}
