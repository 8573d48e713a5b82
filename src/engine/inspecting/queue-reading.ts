/**
 * One queue's overview (counts, metrics, oldest waiting age, live workers) read in one go, for
 * `glidemq top`, the health checks and the Prometheus metrics. It reads through the few Queue
 * methods below (ReadableQueue), not the Queue class, so Queue can render its own metrics with it.
 */
import type { JobCounts } from './job-queries.js';
import type { LifetimeMetrics } from './lifetime-metrics.js';
import { METRICS_RETENTION_MINUTES, type MetricsRange, type QueueMetrics } from './metrics.js';

/** What readQueue needs of a queue (a Queue has it). */
export interface ReadableQueue {
  readonly name: string;
  getJobCounts(): Promise<JobCounts>;
  getMetrics(range: MetricsRange): Promise<QueueMetrics>;
  getOldestWaitingAge(): Promise<number | null>;
  getWorkers(): Promise<unknown[]>;
  /** The lifetime counters (lifetime-metrics.ts), read by the Prometheus metrics only. */
  getLifetimeMetrics(): Promise<LifetimeMetrics>;
}

/** One queue as an overview shows it (read by readQueue). */
export interface QueueReading {
  name: string;
  counts: JobCounts;
  /** The per-minute metrics of the minutes asked for. */
  metrics: QueueMetrics;
  /** ms, on the server's clock; null when no job waits. */
  oldestWaitingMs: number | null;
  /** Live workers in the queue's registry. */
  workers: number;
}

/** Reads `q`'s counts, `minutes` of metrics, oldest waiting age and live workers, at once. */
export async function readQueue(q: ReadableQueue, minutes = METRICS_RETENTION_MINUTES): Promise<QueueReading> {
  const [counts, metrics, oldestWaitingMs, workers] = await Promise.all([
    q.getJobCounts(),
    q.getMetrics({ minutes }),
    q.getOldestWaitingAge(),
    q.getWorkers(),
  ]);
  return { name: q.name, counts, metrics, oldestWaitingMs, workers: workers.length };
}

