/** `glidemq pel <queue>`: what is claimed but not finished (stream pending entries, list claims). */
import type { Command } from 'commander';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { action } from '../context.js';
import { existingQueue, withMaintenance } from '../maintenance.js';
import { colour, formatMs, print, printJson, table, warn } from '../output.js';
import { readWorkers, type WorkerInfo } from '../../engine/consuming/worker-registry.js';

interface PelFlags {
  minIdle: string;
  limit: string;
}

export function register(program: Command): void {
  program
    .command('pel <queue>')
    .description("what is claimed but not finished: the stream's pending entries and the claimed priority/LIFO jobs")
    .option('--min-idle <d>', 'only claims idle at least this long (ms, or 250ms, 5s, 2m)', '0')
    .option('--limit <n>', 'at most this many claims of each kind', '1000')
    .addHelpText(
      'after',
      `
Stream jobs show their pending entry (consumer, idle time, delivery count); priority and LIFO jobs
have no pending entry and are listed from the list-active-ids set with the time since their last
heartbeat. A claim idle longer than the lock duration is what stalled recovery takes back. The
worker column names the live worker (host:pid) holding each claim, from the worker registry
(glidemq workers); "gone": no live worker has that consumer name (its process died or closed).

Examples:
  $ glidemq pel emails
  $ glidemq pel emails --min-idle 30s
  $ glidemq pel emails --json | jq '.stream[] | select(.deliveries > 1)'`,
    )
    .action(
      action(async (ctx, queue: string, flags: PelFlags) => {
        const minIdle = parseDuration(flags.minIdle, '--min-idle');
        const limit = parseInteger(flags.limit, '--limit', 1, 10_000);
        const { claims, workers } = await withMaintenance(ctx, async (s) => {
          const m = await existingQueue(s, ctx, queue);
          const [c, w] = await Promise.all([m.listClaims({ minIdle, limit }), readWorkers(s.client, m.keys)]);
          return { claims: c, workers: w.workers };
        });
        // the worker behind a claim: its consumer name is the id the worker registered under
        const byId = new Map<string, WorkerInfo>(workers.map((w) => [w.id, w]));
        const liveWorker = (consumer: string) => {
          const w = byId.get(consumer);
          return w ? { host: w.host, pid: w.pid } : null;
        };
        const workerCell = (consumer: string) => {
          const w = byId.get(consumer);
          return w ? `${w.host}:${w.pid}` : colour.dim('gone');
        };
        if (!claims.listTrusted) {
          warn(`the list-active-ids set of ${queue} is not seeded yet, so priority/LIFO claims may be missing (glidemq heal ${queue} re-seeds it)`);
        }
        if (ctx.json) {
          // worker: the live worker holding the claim (host, pid), null when none is registered
          printJson({
            stream: claims.stream.map((e) => ({ ...e, worker: liveWorker(e.consumer) })),
            list: claims.list.map((c) => ({ ...c, worker: liveWorker(c.consumer) })),
          });
          return 0;
        }
        if (claims.stream.length === 0 && claims.list.length === 0) {
          print(colour.dim(`nothing claimed in ${queue}${minIdle > 0 ? ` for ${formatMs(minIdle)} or longer` : ''}`));
          return 0;
        }
        print(colour.bold(`stream pending entries (${claims.stream.length})`));
        if (claims.stream.length > 0) {
          print(
            table({
              head: ['job', 'name', 'consumer', 'worker', 'idle', 'deliv.', 'attempts'],
              rows: claims.stream.map((e) => [
                e.jobId || colour.dim('(entry gone)'),
                e.state === 'waiting' ? `${e.name} ${colour.dim('(not activated)')}` : e.name,
                e.consumer,
                workerCell(e.consumer),
                formatMs(e.idleMs),
                e.deliveries,
                e.attemptsMade,
              ]),
              numeric: [4, 5, 6],
              wrap: [1, 2, 3],
            }),
          );
        }
        print(colour.bold(`priority/LIFO claims (${claims.list.length})`));
        if (claims.list.length > 0) {
          print(
            table({
              head: ['job', 'name', 'kind', 'consumer', 'worker', 'idle', 'attempts'],
              rows: claims.list.map((c) => [c.jobId, c.name, c.kind, c.consumer, workerCell(c.consumer), formatMs(c.idleMs), c.attemptsMade]),
              numeric: [5, 6],
              wrap: [1, 3, 4],
            }),
          );
        }
        return 0;
      }),
    );
}
