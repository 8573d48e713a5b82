/** `glidemq queues`: the queues under the prefix, with their counts. */
import type { Command } from 'commander';
import { acquireClient, closeClient, settleTopology } from '../../engine/connecting/connection.js';
import { listQueues } from '../../engine/connecting/discovery.js';
import { ensureLibrary } from '../../engine/connecting/library.js';
import { Queue, type JobCounts } from '../../engine/queue/queue.js';
import { action } from '../context.js';
import { colour, formatCount, formatDuration, print, printJson, table } from '../output.js';

export function register(program: Command): void {
  program
    .command('queues')
    .description('the queues under the prefix, with their counts, live workers and oldest waiting age')
    .addHelpText(
      'after',
      `
Columns: wait (waiting, paused or not), active, delay (delayed), prio (prioritized), done
(completed), failed, workers (live workers, glidemq workers lists them), oldest (how long the
oldest waiting job has waited, by the server's clock: the queue's latency). --json gives every
count by its full name, with consumers (the stream's consumer group), oldestWaitingMs and workers.

Examples:
  $ glidemq queues
  $ glidemq queues --prefix myapp --json`,
    )
    .action(
      action(async (ctx) => {
        const acquired = acquireClient(ctx.connection);
        let rows: ({ name: string; oldestWaitingMs: number | null; workers: number } & JobCounts)[];
        try {
          const client = await settleTopology(acquired); // a plain URL naming a cluster node scans every primary
          await ensureLibrary(client);
          const names = await listQueues(client, ctx.prefix);
          // One connection for every queue, their calls pipelined on it: a Queue given a client
          // neither opens nor closes a connection of its own.
          rows = await Promise.all(
            names.map(async (name) => {
              const q = new Queue(name, { connection: client, prefix: ctx.prefix });
              try {
                const [counts, oldest, workers] = await Promise.all([q.getJobCounts(), q.getOldestWaitingAge(), q.getWorkers()]);
                return { name, ...counts, oldestWaitingMs: oldest, workers: workers.length };
              } finally {
                await q.close();
              }
            }),
          );
        } finally {
          await closeClient(acquired.client);
        }
        if (ctx.json) {
          printJson(rows.map(({ listActive: _l, ...r }) => r));
          return 0;
        }
        if (rows.length === 0) {
          print(colour.dim(`no queues under prefix "${ctx.prefix}" at ${ctx.where}`));
          return 0;
        }
        const n = (v: number) => formatCount(v);
        print(
          table({
            // short heads so the table fits 80 columns (the help says what they mean)
            head: ['queue', 'wait', 'active', 'delay', 'prio', 'done', 'failed', 'workers', 'oldest'],
            // wait: the jobs that wait, held by a pause or not (getJobCounts counts a paused
            // queue's under `paused`); a paused queue is marked after its name
            rows: rows.map((r) => [
              r.isPaused ? `${r.name} ${colour.yellow('(paused)')}` : r.name,
              n(r.waiting + r.paused), n(r.active), n(r.delayed), n(r.prioritized), n(r.completed), n(r.failed), r.workers,
              r.oldestWaitingMs === null ? '-' : formatDuration(r.oldestWaitingMs),
            ]),
            numeric: [1, 2, 3, 4, 5, 6, 7, 8],
            wrap: 0,
            whole: 0, // a queue name is copied: never broken (on a line of its own when it cannot fit)
          }),
        );
        return 0;
      }),
    );
}
