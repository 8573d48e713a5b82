/**
 * `glidemq workers [queue]`: the live workers, from the registry each worker keeps in its queue
 * with an expiry on the server's clock (src/engine/consuming/worker-registry.ts): a worker that died without
 * closing is gone once its entry expires. Without a queue: the workers of every queue under the prefix.
 */
import type { Command } from 'commander';
import { acquireClient, closeClient, settleTopology } from '../../engine/connecting/connection.js';
import { ensureLibrary } from '../../engine/connecting/library.js';
import { readAllWorkers, readWorkers, type WorkersReading } from '../../engine/consuming/worker-registry.js';
import { action, withQueue, type CommandContext } from '../context.js';
import { colour, formatDuration, plural, print, printJson, table } from '../output.js';

/** Every queue's workers, on one connection (a URL naming a cluster node scans every primary). */
async function allWorkers(ctx: CommandContext): Promise<WorkersReading> {
  const acquired = acquireClient(ctx.connection);
  try {
    const client = await settleTopology(acquired);
    await ensureLibrary(client);
    return await readAllWorkers(client, ctx.prefix);
  } finally {
    await closeClient(acquired.client);
  }
}

export function register(program: Command): void {
  program
    .command('workers [queue]')
    .description('the live workers of a queue (or of every queue): host, pid, concurrency, running jobs, started, last seen, version')
    .addHelpText(
      'after',
      `
Each worker registers itself in its queue when it starts, refreshes its entry on a timer and
removes it when it closes; a worker that died without closing disappears once its entry expires
(the worker option registryTtl, 30s by default). Times are measured by the server's clock. The id
in --json is the worker's consumer name, the one \`glidemq pel\` shows for its claims.

Examples:
  $ glidemq workers
  $ glidemq workers emails
  $ glidemq workers emails --json | jq '.[] | select(.running == .concurrency)'`,
    )
    .action(
      action(async (ctx, queue: string | undefined) => {
        const { now, workers } = queue === undefined ? await allWorkers(ctx) : await withQueue(ctx, queue, (q) => readWorkers(q.client, q.keys));
        if (ctx.json) {
          printJson(workers);
          return 0;
        }
        if (workers.length === 0) {
          print(colour.dim(queue === undefined ? `no live workers under prefix "${ctx.prefix}" at ${ctx.where}` : `no live workers on ${queue}`));
          return 0;
        }
        const ago = (ms: number) => `${formatDuration(Math.max(0, now - ms))} ago`;
        print(
          table({
            head: ['host', 'pid', 'queue', 'conc', 'running', 'started', 'last seen', 'version'],
            rows: workers.map((w) => [w.host, w.pid, w.queue, w.concurrency, w.running, ago(w.startedAt), ago(w.lastSeen), w.version]),
            numeric: [1, 3, 4],
            wrap: [0, 2],
          }),
        );
        const running = workers.reduce((n, w) => n + w.running, 0);
        const slots = workers.reduce((n, w) => n + w.concurrency, 0);
        print(colour.dim(`${plural(workers.length, 'worker')}, ${running} of ${plural(slots, 'slot')} busy`));
        return 0;
      }),
    );
}
