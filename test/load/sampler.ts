/**
 * Samples what the load run asserts on, once per interval: Valkey's memory (INFO memory), its key
 * count, the size of every structure retention has to bound, and jobs finished since the last sample.
 */
import type { Redis } from 'ioredis';
import type { Queue } from '../../src/engine/queue/queue.js';
import { CONSUMER_GROUP } from '../../src/engine/shared/keys.js';

export interface StructureSizes {
  /** Stream entries (waiting + claimed stream jobs; acked ones are deleted). */
  stream: number;
  /** Claimed, not yet acked stream entries. */
  pending: number;
  streamBytes: number;
  events: number;
  completed: number;
  failed: number;
  /** Age of the oldest kept completed / failed job (ms; 0 when none). */
  oldestCompletedMs: number;
  oldestFailedMs: number;
  scheduled: number;
  prioritized: number;
  lifo: number;
  dedup: number;
  /** Per-minute metric buckets (index entries). */
  metricsMinutes: number;
}

export interface Sample {
  /** Seconds since the run started. */
  t: number;
  /** Jobs finished (final outcomes) per second over the interval that ends here. */
  jobsPerSec: number;
  /** Final outcomes so far. */
  finished: number;
  usedMemory: number;
  dataset: number;
  keys: number;
  queues: Record<string, StructureSizes>;
}

function infoField(info: string, name: string): number {
  const m = new RegExp(`^${name}:(\\d+)`, 'm').exec(info);
  return m ? Number(m[1]) : 0;
}

async function sizes(queue: Queue, now: number): Promise<StructureSizes> {
  const k = queue.keys;
  const r = (await queue.client
    .multi()
    .xlen(k.stream)
    .xpending(k.stream, CONSUMER_GROUP)
    .memory('USAGE', k.stream)
    .xlen(k.events)
    .zcard(k.completed)
    .zcard(k.failed)
    .zrange(k.completed, '0', '0', 'WITHSCORES')
    .zrange(k.failed, '0', '0', 'WITHSCORES')
    .zcard(k.scheduled)
    .zcard(k.prioritized)
    .llen(k.lifo)
    .hlen(k.dedup)
    .zcard(k.metrics('minutes'))
    .exec()) as [Error | null, unknown][];
  const v = r.map(([err, x]) => (err ? undefined : x));
  const age = (x: unknown) => (Array.isArray(x) && x.length === 2 ? Math.max(0, now - Number(x[1])) : 0);
  return {
    stream: Number(v[0] ?? 0),
    pending: Number((v[1] as unknown[] | undefined)?.[0] ?? 0),
    streamBytes: Number(v[2] ?? 0),
    events: Number(v[3] ?? 0),
    completed: Number(v[4] ?? 0),
    failed: Number(v[5] ?? 0),
    oldestCompletedMs: age(v[6]),
    oldestFailedMs: age(v[7]),
    scheduled: Number(v[8] ?? 0),
    prioritized: Number(v[9] ?? 0),
    lifo: Number(v[10] ?? 0),
    dedup: Number(v[11] ?? 0),
    metricsMinutes: Number(v[12] ?? 0),
  };
}

export class Sampler {
  readonly samples: Sample[] = [];
  private readonly started = Date.now();
  private lastAt = Date.now();
  private lastFinished = 0;

  constructor(
    private readonly admin: Redis,
    private readonly queues: Queue[],
    private readonly finished: () => number,
  ) {}

  async sample(): Promise<Sample> {
    const now = Date.now();
    const finished = this.finished();
    const [memory, keyspace] = await Promise.all([this.admin.info('memory'), this.admin.info('keyspace')]);
    const queues: Record<string, StructureSizes> = {};
    for (const q of this.queues) queues[q.name] = await sizes(q, now);
    const s: Sample = {
      t: Math.round((now - this.started) / 100) / 10,
      jobsPerSec: Math.round(((finished - this.lastFinished) * 1000) / Math.max(1, now - this.lastAt)),
      finished,
      usedMemory: infoField(memory, 'used_memory'),
      dataset: infoField(memory, 'used_memory_dataset'),
      keys: Number(/^db0:keys=(\d+)/m.exec(keyspace)?.[1] ?? 0),
      queues,
    };
    this.lastAt = now;
    this.lastFinished = finished;
    this.samples.push(s);
    return s;
  }
}
