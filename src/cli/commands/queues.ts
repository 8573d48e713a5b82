/** `glidemq queues`: the queues under the prefix, with their counts. */
import type { Command } from 'commander';
import { acquireClient, closeClient, settleTopology } from '../../engine/connection.js';
import { listQueues } from '../../engine/discovery.js';
import { ensureLibrary } from '../../engine/library.js';
import { Queue, type JobCounts } from '../../engine/queue.js';
import { action } from '../context.js';
import { colour, print, printJson, table } from '../output.js';

export function register(program: Command): void {
  program
    .command('queues')
    .description('the queues under the prefix, with their counts')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq queues
  $ glidemq queues --prefix myapp --json`,
    )
    .action(
      action(async (ctx) => {
        const acquired = acquireClient(ctx.connection);
        let rows: ({ name: string } & JobCounts)[];
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
                return { name, ...(await q.getJobCounts()) };
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
        print(
          table({
            head: ['queue', 'waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'consumers', 'paused'],
            // waiting: the jobs that wait, held by a pause or not (getJobCounts counts a paused
            // queue's under `paused`); the last column says whether they are held
            rows: rows.map((r) => [r.name, r.waiting + r.paused, r.active, r.delayed, r.prioritized, r.completed, r.failed, r.consumers, r.isPaused ? 'yes' : '']),
            numeric: [1, 2, 3, 4, 5, 6, 7],
          }),
        );
        return 0;
      }),
    );
}
