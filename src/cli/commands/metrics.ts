/** `glidemq metrics <queue>`: completed/failed attempts and processing time per minute. */
import type { Command } from 'commander';
import { parseInteger } from '../../engine/duration.js';
import { METRICS_RETENTION_MINUTES, type MinuteMetrics, type QueueMetrics } from '../../engine/metrics.js';
import { action, withQueue } from '../context.js';
import { colour, print, printJson, sparkline, table } from '../output.js';

interface MetricsFlags {
  minutes: string;
  table?: boolean;
}

/** The widest a sparkline gets; longer ranges are summed into wider buckets. */
const SPARK_WIDTH = 60;

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
per attempt. Times are local to this machine.`,
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
        const otherDay = new Date(m.from).toDateString() !== new Date(m.to).toDateString();
        print(`${colour.bold(queue)}: ${clock(m.from, true)} – ${clock(m.to, otherDay)} (${m.minutes.length} min)`);
        if (flags.table) printTable(m);
        else printSparklines(m);
        return 0;
      }),
    );
}

function printSparklines(m: QueueMetrics): void {
  const buckets = downsample(m.minutes, SPARK_WIDTH);
  const per = Math.round(m.minutes.length / buckets.length);
  const rows: (string | number)[][] = [
    ['completed', sparkline(buckets.map((b) => b.completed)), m.completed],
    ['failed', colour.red(sparkline(buckets.map((b) => b.failed))), m.failed],
    ['avg ms', sparkline(buckets.map((b) => b.avgMs)), m.avgMs],
  ];
  print(table({ head: ['', per > 1 ? `per ${per} min` : 'per minute', 'total'], rows, numeric: [2] }));
}

function printTable(m: QueueMetrics): void {
  const spansDays = new Date(m.from).toDateString() !== new Date(m.to).toDateString();
  const rows = m.minutes.map((x) => [clock(x.minute, spansDays), x.completed, x.failed, x.avgMs, x.processingMs]);
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

function clock(ms: number, withDate: boolean): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  const hm = `${two(d.getHours())}:${two(d.getMinutes())}`;
  return withDate ? `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${hm}` : hm;
}
