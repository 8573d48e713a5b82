/** `glidemq metrics <queue>`: completed/failed attempts and processing time per minute. */
import type { Command } from 'commander';
import { parseInteger } from '../../engine/shared/duration.js';
import { METRICS_RETENTION_MINUTES, type MinuteMetrics, type QueueMetrics } from '../../engine/inspecting/metrics.js';
import { action, withQueue } from '../context.js';
import { colour, formatClock, outputWidth, print, printJson, sameDay, sparkline, table, timeZoneLabel } from '../output.js';

interface MetricsFlags {
  minutes: string;
  table?: boolean;
}

/** The widest a sparkline gets; longer ranges (or a narrower terminal) sum minutes into buckets. */
const SPARK_WIDTH = 60;
/** What the sparkline table has besides the line: borders, padding, "completed", a total. */
const SPARK_TABLE_REST = 4 + 6 + 'completed'.length;

export function register(program: Command): void {
  program
    .command('metrics <queue>')
    .description('completed and failed attempts and processing time per minute (24 hours are kept)')
    .option('--minutes <n>', `how many minutes up to now, 1 to ${METRICS_RETENTION_MINUTES}`, '60')
    .option('--table', 'one row per minute instead of sparklines')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq metrics emails                  sparklines of the last hour
  $ glidemq metrics emails --minutes 1440   the whole day kept
  $ glidemq metrics emails --table --minutes 15
  $ glidemq metrics emails --json | jq '.minutes[] | select(.failed > 0)'

"failed" counts failed attempts, including ones that were retried; "avg ms" is processing time
per attempt. Times are local to this machine (with --utc, UTC).`,
    )
    .action(
      action(async (ctx, queue: string, flags: MetricsFlags) => {
        const minutes = parseInteger(flags.minutes, '--minutes', 1, METRICS_RETENTION_MINUTES);
        // The server resolves "the last N minutes" on its own clock: this machine's may be off.
        const m = await withQueue(ctx, queue, (q) => q.getMetrics({ minutes }));
        if (ctx.json) {
          printJson({ queue, ...m });
          return 0;
        }
        const span = `${formatClock(m.from, true)} – ${formatClock(m.to, !sameDay(m.from, m.to))} ${timeZoneLabel(m.to)} (${m.minutes.length} min)`;
        // a long queue name gets a line of its own rather than a line wider than the terminal
        if (queue.length + 2 + span.length <= outputWidth()) print(`${colour.bold(queue)}: ${span}`);
        else print(`${colour.bold(queue)}\n${span}`);
        if (flags.table) printTable(m);
        else printSparklines(m);
        return 0;
      }),
    );
}

function printSparklines(m: QueueMetrics): void {
  const totalWidth = Math.max('total'.length, ...[m.completed, m.failed, m.avgMs].map((n) => String(n).length));
  const buckets = downsample(m.minutes, Math.max(10, Math.min(SPARK_WIDTH, outputWidth() - SPARK_TABLE_REST - totalWidth)));
  const per = Math.round(m.minutes.length / buckets.length);
  const rows: (string | number)[][] = [
    ['completed', sparkline(buckets.map((b) => b.completed)), m.completed],
    ['failed', colour.red(sparkline(buckets.map((b) => b.failed))), m.failed],
    ['avg ms', sparkline(buckets.map((b) => b.avgMs)), m.avgMs],
  ];
  print(table({ head: ['', per > 1 ? `per ${per} min` : 'per minute', 'total'], rows, numeric: [2] }));
}

function printTable(m: QueueMetrics): void {
  const spansDays = !sameDay(m.from, m.to);
  const rows = m.minutes.map((x) => [formatClock(x.minute, spansDays), x.completed, x.failed, x.avgMs, x.processingMs]);
  rows.push([colour.bold('total'), m.completed, m.failed, m.avgMs, m.processingMs]);
  print(table({ head: ['minute', 'completed', 'failed', 'avg ms', 'total ms'], rows, numeric: [1, 2, 3, 4] }));
}

/** Sums consecutive minutes into at most `width` buckets (avgMs recomputed from the sums). */
function downsample(minutes: MinuteMetrics[], width: number): MinuteMetrics[] {
  if (minutes.length <= width) return minutes;
  const size = Math.ceil(minutes.length / width);
  const out: MinuteMetrics[] = [];
  for (let i = 0; i < minutes.length; i += size) {
    const chunk = minutes.slice(i, i + size);
    const completed = chunk.reduce((s, x) => s + x.completed, 0);
    const failed = chunk.reduce((s, x) => s + x.failed, 0);
    const processingMs = chunk.reduce((s, x) => s + x.processingMs, 0);
    const n = completed + failed;
    out.push({ minute: chunk[0].minute, completed, failed, processingMs, avgMs: n ? Math.round(processingMs / n) : 0 });
  }
  return out;
}
