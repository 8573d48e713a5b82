/** `glidemq pel <queue>`: what is claimed but not finished (stream pending entries, list claims). */
import type { Command } from 'commander';
import { parseDuration, parseInteger } from '../../engine/duration.js';
import { action } from '../context.js';
import { existingQueue, withMaintenance } from '../maintenance.js';
import { colour, formatMs, print, printJson, table, warn } from '../output.js';

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
heartbeat. A claim idle longer than the lock duration is what stalled recovery takes back.

Examples:
  $ glidemq pel emails
  $ glidemq pel emails --min-idle 30s
  $ glidemq pel emails --json | jq '.stream[] | select(.deliveries > 1)'`,
    )
    .action(
      action(async (ctx, queue: string, flags: PelFlags) => {
        const minIdle = parseDuration(flags.minIdle, '--min-idle');
        const limit = parseInteger(flags.limit, '--limit', 1, 10_000);
        const claims = await withMaintenance(ctx, async (s) => (await existingQueue(s, ctx, queue)).listClaims({ minIdle, limit }));
        if (!claims.listTrusted) {
          warn(`the list-active-ids set of ${queue} is not seeded yet, so priority/LIFO claims may be missing (glidemq heal ${queue} re-seeds it)`);
        }
        if (ctx.json) {
          printJson({ stream: claims.stream, list: claims.list });
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
              head: ['job', 'name', 'consumer', 'idle', 'deliveries', 'attempts'],
              rows: claims.stream.map((e) => [
                e.jobId || colour.dim('(entry gone)'),
                e.state === 'waiting' ? `${e.name} ${colour.dim('(not activated)')}` : e.name,
                e.consumer,
                formatMs(e.idleMs),
                e.deliveries,
                e.attemptsMade,
              ]),
              numeric: [3, 4, 5],
            }),
          );
        }
        print(colour.bold(`priority/LIFO claims (${claims.list.length})`));
        if (claims.list.length > 0) {
          print(
            table({
              head: ['job', 'name', 'kind', 'consumer', 'idle', 'attempts'],
              rows: claims.list.map((c) => [c.jobId, c.name, c.kind, c.consumer, formatMs(c.idleMs), c.attemptsMade]),
              numeric: [4, 5],
            }),
          );
        }
        return 0;
      }),
    );
}
