/**
 * What the load run adds: a fixed, repeating mix of job kinds (plain, priority, LIFO, delayed,
 * deduplicated) so every delivery path and every structure retention has to bound is exercised,
 * some of them designed to fail after a retry. Deterministic from the sequence number, so a
 * producer in another process and the test agree on which jobs must fail.
 */
import type { BulkJob, JobOptions, Retention } from '../../src/engine/producing/options.js';

export interface RetentionRule {
  removeOnComplete: Retention;
  removeOnFail: Retention;
}

/** Jobs designed to fail: every attempt throws; they get 2 attempts (one retry after a backoff). */
export function designedToFail(i: number): boolean {
  return i % 10 === 7 || i % 20 === 1;
}

export function mixJob(label: string, i: number, retention: RetentionRule): BulkJob {
  const opts: JobOptions = { ...retention };
  switch (i % 10) {
    case 0:
      opts.priority = 1 + (i % 3);
      break;
    case 1:
      opts.lifo = true;
      break;
    case 2:
      opts.delay = 30;
      break;
    case 3:
      // unique ids: every add is new, and every entry must be swept once it is over
      opts.dedup = { id: `${label}-${i}`, ttl: 2000, mode: 'simple' };
      break;
  }
  const fail = designedToFail(i);
  if (fail) {
    opts.attempts = 2;
    opts.backoff = 20;
  }
  return { name: `load-${i % 10}`, data: { p: label, i, ...(fail ? { fail: true } : {}), pad: 'x'.repeat(64) }, opts };
}
