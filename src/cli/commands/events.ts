/** `glidemq events <queue>`: the queue's event stream, the recent events or followed live. */
import type { Command } from 'commander';
import { parseInteger } from '../../engine/shared/duration.js';
import { EventLog, checkEventId, type EventRecord } from '../../engine/operating/event-log.js';
import { action, warnUnknownQueue } from '../context.js';
import { untilSignal } from '../signals.js';
import { colour, ellipsis, formatTime, notice, outputWidth, padCell, print, printJsonLine, warn } from '../output.js';

interface EventsFlags {
  follow?: boolean;
  since?: string;
  limit: string;
}

const EVENT_COLOURS: Record<string, (s: string) => string> = {
  completed: (s) => colour.green(s),
  failed: (s) => colour.red(s),
  'retries-exhausted': (s) => colour.red(s),
  retrying: (s) => colour.yellow(s),
  stalled: (s) => colour.yellow(s),
  removed: (s) => colour.magenta(s),
};

export function register(program: Command): void {
  program
    .command('events <queue>')
    .description("the queue's events (added, active, completed, failed, retrying, stalled, ...): the recent ones, or followed live")
    .option('-f, --follow', 'after the recent events, print new ones as they happen until Ctrl-C (SIGINT/SIGTERM)')
    .option('--since <id>', 'only events after this event id (the id field of --json; 0: every event kept)')
    .option('--limit <n>', 'how many recent events (the newest; with --since the first after it); 0 with --follow: only new ones', '50')
    .addHelpText(
      'after',
      `
Each line: time, event, job id, and the event's details. --json prints one JSON object per line
(id, ts, event, jobId, details; ts: ms since the epoch, by the server's clock); the id is what
--since takes. The server keeps about the last 1000 events. The per-job events active,
completed, retries-exhausted and drained are written only while someone listens (a QueueEvents,
or this command with --follow); failed, retrying, stalled, added, progress, removed, paused and
resumed are always written.

Examples:
  $ glidemq events emails                      the last 50 events
  $ glidemq events emails --follow             then new ones live, until Ctrl-C
  $ glidemq events emails -f --limit 0 --json | jq 'select(.event == "failed")'
  $ glidemq events emails --since 1700000000000-0 --limit 500`,
    )
    .action(
      action(async (ctx, queue: string, flags: EventsFlags) => {
        const limit = parseInteger(flags.limit, '--limit', flags.follow ? 0 : 1, 10_000);
        if (flags.since !== undefined) checkEventId(flags.since, '--since');
        const log = new EventLog(queue, { connection: ctx.connection, prefix: ctx.prefix });
        const show = (e: EventRecord) => (ctx.json ? printJsonLine(e) : print(describe(e)));
        try {
          if (!(await log.exists())) warnUnknownQueue(ctx, queue);
          if (!flags.follow) {
            const events = await log.recent({ since: flags.since, limit });
            if (events.length === 0 && !ctx.json) notice(`no events in ${queue}${flags.since ? ` after ${flags.since}` : ''}`);
            events.forEach(show);
            return 0;
          }
          const onConnection = (state: 'lost' | 'back') =>
            state === 'lost' ? warn(`lost the connection to ${ctx.where}: reconnecting`) : notice(`connection to ${ctx.where} is back`);
          const following =
            flags.since !== undefined
              ? log.follow({ since: flags.since, onEvent: show, onConnection })
              : log.recentThenFollow(limit, { onEvent: show, onConnection });
          await Promise.race([following, untilSignal()]);
          return 0;
        } finally {
          await log.close();
        }
      }),
    );
}


/** One line that fits outputWidth(): time, event, job id, then the details (key=value) cut to fit. */
function describe(e: EventRecord): string {
  const time = formatTime(e.ts);
  const name = (EVENT_COLOURS[e.event] ?? ((s: string) => s))(padCell(e.event, 17));
  const job = e.jobId ? padCell(e.jobId, Math.max(8, e.jobId.length)) : colour.dim(padCell('-', 8));
  const used = time.length + 2 + 17 + 1 + Math.max(8, e.jobId.length) + 1;
  const details = Object.entries(e.details)
    .map(([k, v]) => `${k}=${/\s/.test(v) || v === '' ? JSON.stringify(v) : v}`)
    .join(' ');
  return `${colour.dim(time)}  ${name} ${job} ${ellipsis(details, Math.max(20, outputWidth() - used))}`.trimEnd();
}
