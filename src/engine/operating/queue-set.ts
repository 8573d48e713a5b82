/**
 * Many queues read over one connection, as `glidemq top` and the Prometheus exporter read them.
 *
 * A Queue given a client opens no connection of its own, so every queue of the set shares the one
 * client and their calls are pipelined on it (never a connection per queue). Without named queues
 * the set is every queue under the prefix, found by SCAN again at most every `rediscoverMs` (a
 * SCAN of the keyspace is not a per-second job). Reading a queue writes nothing.
 */
import type { Client } from '../connecting/connection.js';
import { listQueues } from '../connecting/discovery.js';
import { validateQueueName } from '../shared/keys.js';
import type { QueueMetrics } from '../inspecting/metrics.js';
import { MINUTE_MS, METRICS_RETENTION_MINUTES } from '../inspecting/metrics.js';
import { Queue } from '../queue/queue.js';
import { readQueue, type QueueReading } from '../inspecting/queue-reading.js';

export { readQueue, type QueueReading } from '../inspecting/queue-reading.js';

export class QueueSet {
  private readonly queues = new Map<string, Queue>();
  private readonly named: string[] | undefined;
  private found: string[] = [];
  private foundAt = -Infinity;

  /**
   * `named`: the queues to read (none or empty: every queue under the prefix); `rediscoverMs`:
   * how long a SCAN's answer stands (0: every names() call scans).
   */
  constructor(
    private readonly client: Client,
    private readonly prefix: string,
    named?: string[],
    private readonly rediscoverMs = 0,
  ) {
    this.named = named?.length ? [...new Set(named.map((n) => validateQueueName(n)))] : undefined;
  }

  /** The Queue of `name` on the shared client (made once). */
  get(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, { connection: this.client, prefix: this.prefix });
      this.queues.set(name, q);
    }
    return q;
  }

  /** The queues the set covers now: the named ones, or those under the prefix. */
  async names(now = performance.now()): Promise<string[]> {
    if (this.named) return this.named;
    if (now - this.foundAt >= this.rediscoverMs) {
      this.found = await listQueues(this.client, this.prefix);
      this.foundAt = now;
    }
    return this.found;
  }

  /** The named queues nothing ever used (no meta hash): a typo, usually. Writes nothing. */
  async missing(): Promise<string[]> {
    const names = this.named ?? [];
    const found = await Promise.all(names.map((n) => this.get(n).exists()));
    return names.filter((_, i) => !found[i]);
  }

  /** The shared connection gave up reconnecting: no later read can succeed. */
  get ended(): boolean {
    return this.client.status === 'end';
  }

  /** Closes the Queue objects (not the shared client, which is the caller's). */
  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close().catch(() => undefined)));
    this.queues.clear();
  }
}

/** A per-minute counter as one read of the metrics saw it: minute start (ms) -> count. */
export type MinuteCounts = Map<number, number>;

/**
 * How much a per-minute counter grew between two reads: the growth of every minute the second
 * read has, from the first read's earliest minute on (a minute it had not seen yet grew from 0).
 * The second read must reach back to the first read's last minute: ask for the minutes the
 * interval spans, and one more.
 */
export function counterGrowth(before: MinuteCounts, after: MinuteCounts): number {
  if (before.size === 0) return 0;
  const first = Math.min(...before.keys());
  let grown = 0;
  for (const [minute, n] of after) if (minute >= first) grown += n - (before.get(minute) ?? 0);
  return Math.max(0, grown); // a counter only grows; less would be a minute expired between reads
}

/** A reading with the completed and failed attempts per second since the queue's previous reading. */
export interface RatedReading extends QueueReading {
  /** null on a queue's first reading (nothing to measure from yet). */
  completedPerSec: number | null;
  failedPerSec: number | null;
}

interface Seen {
  /** performance.now() when the metrics were asked for. */
  at: number;
  completed: MinuteCounts;
  failed: MinuteCounts;
}

const byMinute = (m: QueueMetrics, f: 'completed' | 'failed'): MinuteCounts => new Map(m.minutes.map((x) => [x.minute, x[f]]));

/**
 * Reads every queue of a set again and again, turning the growth of each queue's per-minute
 * completed and failed counters between two readings into rates (the metrics count attempts on
 * the server; a job count would fall as removeOnComplete deletes jobs).
 */
export class QueueSampler {
  private readonly seen = new Map<string, Seen>();
  /** Enough minutes of metrics to reach back over one interval (and a slow refresh) to the last read. */
  private readonly minutes: number;

  constructor(
    readonly set: QueueSet,
    intervalMs: number,
  ) {
    this.minutes = Math.min(METRICS_RETENTION_MINUTES, Math.ceil(intervalMs / MINUTE_MS) + 2);
  }

  async sample(): Promise<RatedReading[]> {
    const names = await this.set.names();
    const readings = await Promise.all(names.map((n) => this.rate(n)));
    for (const name of this.seen.keys()) if (!names.includes(name)) this.seen.delete(name);
    return readings;
  }

  private async rate(name: string): Promise<RatedReading> {
    const at = performance.now();
    const reading = await readQueue(this.set.get(name), this.minutes);
    const now: Seen = { at, completed: byMinute(reading.metrics, 'completed'), failed: byMinute(reading.metrics, 'failed') };
    const before = this.seen.get(name);
    this.seen.set(name, now);
    const seconds = before ? (now.at - before.at) / 1000 : 0;
    const rate = (f: 'completed' | 'failed') => (before && seconds > 0 ? counterGrowth(before[f], now[f]) / seconds : null);
    return { ...reading, completedPerSec: rate('completed'), failedPerSec: rate('failed') };
  }
}
