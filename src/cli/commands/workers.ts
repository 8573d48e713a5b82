/**
 * `glidemq workers [queue]`: the live workers, from the registry each worker keeps in its queue
 * with an expiry on the server's clock (src/engine/consuming/worker-registry.ts): a worker that died without
 * closing is gone once its entry expires. Without a queue: the workers of every queue under the prefix.
 * `--quiet <id>` / `--stop <id>` ask one worker, through the same registry, to take no new jobs / to
 * finish its running jobs and exit (it obeys at its next refresh).
 */
import type { Command } from 'commander';
import { acquireClient, closeClient, settleTopology } from '../../engine/connecting/connection.js';
import { ensureLibrary } from '../../engine/connecting/library.js';
import { readAllWorkers, readWorkers, requestAnyWorker, requestWorker, type WorkerInfo, type WorkerRequest, type WorkersReading } from '../../engine/consuming/worker-registry.js';
import { invalid } from '../../engine/shared/errors.js';
import { action, withQueue, type CommandContext } from '../context.js';
import { colour, ellipsis, formatDuration, plural, print, printJson, table } from '../output.js';

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

/** Running job ids a row shows, at most; the rest are counted. */
const IDS_SHOWN = 3;

/** Characters of a running job id a line shows (the line fits 80 columns). */
const ID_WIDTH = 14;

/**
 * "pid 4242 (quiet): running 12, 13, 14 +5 more": under the table, for a worker that runs jobs or
 * was asked something, a few of its running job ids (as of its last refresh), then how many more.
 */
function runningLine(w: WorkerInfo): string | undefined {
  const shown = w.jobs.slice(0, IDS_SHOWN).map((id) => ellipsis(id, ID_WIDTH));
  const others = Math.max(w.running, w.jobs.length) - shown.length;
  if (shown.length === 0 && others === 0 && w.request === null) return undefined;
  const asked = w.request === null ? '' : ` (${w.request === 'quiet' ? 'quiet' : 'stopping'})`;
  const ids = [shown.join(', '), others > 0 ? `+${others} more` : ''].filter((x) => x !== '').join(' ');
  return `pid ${w.pid}${asked}: ${ids === '' ? 'no job running' : `running ${ids}`}`;
}

/** Asks worker `id` (of `queue`, or of whichever queue it serves) to go quiet or to stop; exit 2 when no live worker has that id. */
async function ask(ctx: CommandContext, queue: string | undefined, id: string, request: WorkerRequest): Promise<number> {
  let served: string | undefined;
  if (queue !== undefined) {
    served = (await withQueue(ctx, queue, (q) => requestWorker(q.client, q.keys, id, request))) ? queue : undefined;
  } else {
    const acquired = acquireClient(ctx.connection);
    try {
      const client = await settleTopology(acquired);
      await ensureLibrary(client);
      served = await requestAnyWorker(client, ctx.prefix, id, request);
    } finally {
      await closeClient(acquired.client);
    }
  }
  if (served === undefined) {
    throw invalid(`no live worker with id "${id}" ${queue === undefined ? `under prefix "${ctx.prefix}"` : `on queue ${queue}`} at ${ctx.where} (glidemq workers --json lists the ids)`);
  }
  if (ctx.json) printJson({ asked: id });
  else print(`asked worker ${id} of queue ${served} to ${request === 'quiet' ? 'take no new jobs' : 'finish its running jobs and exit'}; it obeys at its next refresh`);
  return 0;
}

export function register(program: Command): void {
  program
    .command('workers [queue]')
    .description('the live workers of a queue (or of every queue): host, pid, concurrency, running jobs, started, last seen, version')
    .option('--quiet <id>', 'ask worker <id> to take no new jobs (its running jobs go on)')
    .option('--stop <id>', 'ask worker <id> to finish its running jobs and exit')
    .addHelpText(
      'after',
      `
Each worker registers itself in its queue when it starts, refreshes its entry on a timer and
removes it when it closes; a worker that died without closing disappears once its entry expires
(the worker option registryTtl, 30s by default). Times are measured by the server's clock. The id
in --json is the worker's consumer name, the one \`glidemq pel\` shows for its claims. A line under
the table shows a few of the jobs each busy worker runs (--json: jobs), as of its last refresh.
--quiet and --stop go through the registry: the worker reads the request at its next refresh
(within a third of registryTtl and half its lockDuration) and obeys; a \`glidemq worker\` process
says so on stderr, and after --stop exits 0 once its running jobs finished. An id no live worker
has exits 2.

Examples:
  $ glidemq workers
  $ glidemq workers emails
  $ glidemq workers emails --json | jq '.[] | select(.running == .concurrency)'
  $ glidemq workers --quiet web-1:4242:9f3a01bc
  $ glidemq workers emails --stop web-1:4242:9f3a01bc`,
    )
    .action(
      action(async (ctx, queue: string | undefined, f: { quiet?: string; stop?: string }) => {
        if (f.quiet !== undefined && f.stop !== undefined) throw invalid('give --quiet or --stop, not both');
        if (f.quiet !== undefined) return ask(ctx, queue, f.quiet, 'quiet');
        if (f.stop !== undefined) return ask(ctx, queue, f.stop, 'stop');
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
        for (const w of workers) {
          const line = runningLine(w);
          if (line !== undefined) print(line);
        }
        const running = workers.reduce((n, w) => n + w.running, 0);
        const slots = workers.reduce((n, w) => n + w.concurrency, 0);
        print(colour.dim(`${plural(workers.length, 'worker')}, ${running} of ${plural(slots, 'slot')} busy`));
        return 0;
      }),
    );
}
