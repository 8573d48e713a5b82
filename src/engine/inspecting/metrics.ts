/**
 * Reading the per-minute metrics a queue's finish calls record (lua/metrics.lua): completed and
 * failed attempts and processing time per minute, kept for 24 hours.
 */
import { invalid } from '../shared/errors.js';

export const MINUTE_MS = 60_000;
export const METRICS_RETENTION_MINUTES = 1440;

export interface MetricsRange {
  /** Start (ms since epoch, inclusive; rounded down to its minute). Default: `minutes` before `to`. */
  from?: number;
  /** End (ms since epoch, inclusive). Default: the server's now (not this machine's clock). */
  to?: number;
  /** Without `from`: how many minutes up to and including the one of `to` (1..1440, default 60). */
  minutes?: number;
}

export interface MinuteMetrics {
  /** Start of the minute, ms since epoch. */
  minute: number;
  completed: number;
  /** Failed attempts, including ones that were retried. */
  failed: number;
  /** Processing time of the minute's completed and failed attempts, summed. */
  processingMs: number;
  /** processingMs per attempt (0 for a minute without attempts). */
  avgMs: number;
}

export interface QueueMetrics {
  from: number;
  to: number;
  /** Every minute of the range, oldest first; minutes without activity are zero. */
  minutes: MinuteMetrics[];
  completed: number;
  failed: number;
  processingMs: number;
  avgMs: number;
}

/**
 * Checks a range and encodes it as glidemq_getMetrics takes it: from and to in absolute ms, or ''
 * for a default the server resolves against its own clock (to = its now, from = `minutes` before
 * to), and the minutes.
 */
export function encodeRange(range: MetricsRange): [number | '', number | '', number] {
  for (const what of ['from', 'to'] as const) {
    const v = range[what];
    if (v !== undefined && (typeof v !== 'number' || !Number.isSafeInteger(Math.floor(v)) || v < 0)) {
      throw invalid(`metrics range: ${what} must be a time in ms since the epoch, got ${String(v)}`);
    }
  }
  if (range.from !== undefined && range.to !== undefined && range.from > range.to) throw invalid('metrics range: from is after to');
  const minutes = range.minutes ?? 60;
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > METRICS_RETENTION_MINUTES) {
    throw invalid(`metrics range: minutes must be a whole number from 1 to ${METRICS_RETENTION_MINUTES}, got ${String(range.minutes)}`);
  }
  if (range.from !== undefined && range.minutes !== undefined) throw invalid('metrics range: give from or minutes, not both');
  return [range.from === undefined ? '' : Math.floor(range.from), range.to === undefined ? '' : Math.floor(range.to), minutes];
}

/**
 * Builds the dense series from the flat reply of glidemq_getMetrics: the range as the server
 * resolved it (whole minutes, ms), then minute, completed, failed, processingMs per stored minute.
 */
export function buildMetrics(reply: (string | number)[]): QueueMetrics {
  const from = Number(reply[0]);
  const to = Number(reply[1]);
  const byMinute = new Map<number, [number, number, number]>();
  for (let i = 2; i + 3 < reply.length; i += 4) {
    byMinute.set(Number(reply[i]), [Number(reply[i + 1]), Number(reply[i + 2]), Number(reply[i + 3])]);
  }
  const minutes: MinuteMetrics[] = [];
  let completed = 0;
  let failed = 0;
  let processingMs = 0;
  for (let m = from / MINUTE_MS; m <= to / MINUTE_MS; m++) {
    const [c, f, t] = byMinute.get(m) ?? [0, 0, 0];
    completed += c;
    failed += f;
    processingMs += t;
    minutes.push({ minute: m * MINUTE_MS, completed: c, failed: f, processingMs: t, avgMs: avg(t, c + f) });
  }
  return { from, to, minutes, completed, failed, processingMs, avgMs: avg(processingMs, completed + failed) };
}

function avg(total: number, n: number): number {
  return n === 0 ? 0 : Math.round(total / n);
}
