/**
 * A queue's lifetime counters, kept on the server in fields of its meta hash (lua/metrics-buckets.lua
 * LIFETIME): jobs completed and failed for good since the queue began, and a histogram of the
 * processing time of the attempts its workers finished, by outcome. Unlike the per-minute metrics
 * (metrics.ts, 24 hours) they never drop, so Prometheus can take their rate(). Read with one HGETALL.
 */
import type { Client } from '../connecting/client-shape.js';
import type { QueueKeys } from '../shared/keys.js';

/**
 * The histogram's upper bounds in ms, as lua/metrics-buckets.lua BOUNDS_MS has them (a test reads
 * both), then +Inf.
 */
export const PROCESSING_BOUNDS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 1800000] as const;

/** Processing times of one outcome's attempts. */
export interface ProcessingHistogram {
  /** Attempts that took at most PROCESSING_BOUNDS_MS[i] ms (cumulative), then all of them (+Inf). */
  cumulative: number[];
  /** Attempts counted. */
  count: number;
  /** Their processing time summed, in ms. */
  sumMs: number;
}

export interface LifetimeMetrics {
  /** Jobs completed since the queue began. */
  completed: number;
  /** Jobs failed for good since the queue began (any path: processor, stalled, revoked, a failed child). */
  failed: number;
  /** Attempts finished by their workers: completed ones, and failed ones (retried or not). */
  processing: { completed: ProcessingHistogram; failed: ProcessingHistogram };
}

function count(v: string | undefined): number {
  const n = Number(v);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

function histogram(meta: Record<string, string>, outcome: 'c' | 'f'): ProcessingHistogram {
  const cumulative: number[] = [];
  let running = 0;
  for (const le of [...PROCESSING_BOUNDS_MS, 'inf']) {
    running += count(meta[`pt:${outcome}:${le}`]);
    cumulative.push(running);
  }
  return { cumulative, count: running, sumMs: count(meta[`pt:${outcome}:ms`]) };
}

/** The lifetime counters in the fields of a meta hash (a queue that never ran a job: zeros). */
export function lifetimeFromMeta(meta: Record<string, string>): LifetimeMetrics {
  const completed = histogram(meta, 'c');
  return { completed: completed.count, failed: count(meta.failed), processing: { completed, failed: histogram(meta, 'f') } };
}

/** Reads the lifetime counters of the queue of `keys` (read-only: one HGETALL of its meta hash). */
export async function readLifetimeMetrics(client: Client, keys: QueueKeys): Promise<LifetimeMetrics> {
  return lifetimeFromMeta((await client.hgetall(keys.meta)) as Record<string, string>);
}
