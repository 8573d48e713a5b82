/**
 * Reading the per-minute metrics a queue's finish calls record (lua/metrics.lua): completed and
 * failed attempts and processing time per minute, kept for 24 hours.
 */
import { invalid } from './errors.js';

export const MINUTE_MS = 60_000;
export const METRICS_RETENTION_MINUTES = 1440;

export interface MetricsRange {
  /** Start (ms since epoch, inclusive; rounded down to its minute). Default: an hour before `to`. */
  from?: number;
  /** End (ms since epoch, inclusive). Default: now. */
  to?: number;
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

/** Checks a range and resolves its defaults against `now`; the span is capped at the retention window. */
export function resolveRange(range: MetricsRange, now: number): { from: number; to: number } {
  const to = range.to ?? now;
  const from = range.from ?? to - 59 * MINUTE_MS;
  for (const [what, v] of [['from', from], ['to', to]] as const) {
    if (!Number.isFinite(v) || v < 0) throw invalid(`metrics range: ${what} must be a time in ms since the epoch, got ${String(v)}`);
  }
  if (from > to) throw invalid('metrics range: from is after to');
  const fromMinute = Math.floor(from / MINUTE_MS);
  const toMinute = Math.floor(to / MINUTE_MS);
  const first = Math.max(fromMinute, toMinute - METRICS_RETENTION_MINUTES + 1);
  return { from: first * MINUTE_MS, to: toMinute * MINUTE_MS };
}

/** Builds the dense series from the flat reply of glidemq_getMetrics. */
export function buildMetrics(reply: (string | number)[], from: number, to: number): QueueMetrics {
  const byMinute = new Map<number, [number, number, number]>();
  for (let i = 0; i + 3 < reply.length; i += 4) {
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
