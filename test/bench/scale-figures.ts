/**
 * The scale figures that run for both systems: processing from a deep backlog, memory per waiting
 * job and what is left once they are processed, a burst of delayed jobs all due at once, and big
 * payloads. Each runs for one system on a flushed server; every wait is bounded in time.
 */
import type { Redis } from 'ioredis';
import { Queue } from '../../src/index.js';
import { BULK, PAYLOAD_100, processBacklog, type ProcessResult, type Sizes } from './figures.js';
import { infoSection, sleep } from './measure.js';
import type { BenchJob, Producer, System } from './systems.js';

/** The queue figures.ts processes (processBacklog reads it). */
const QUEUE = 'bench';

/** processBacklog's run of `jobs` jobs, at most `maxMs` between the first and last completion. */
function run(sys: System, url: string, concurrency: number, jobs: number, maxMs: number, admin?: Redis): Promise<ProcessResult> {
  return processBacklog(sys, url, concurrency, { backlog: jobs, processMaxMs: maxMs } as Sizes, admin);
}

/** Adds `n` copies of `job` in calls of `per` jobs (one shared batch: both libraries only read it). */
async function fill(p: Producer, n: number, job: BenchJob, per = BULK): Promise<void> {
  const full = Array.from({ length: per }, () => job);
  for (let done = 0; done < n; done += per) await p.addBulk(n - done >= per ? full : full.slice(0, n - done));
}

/** used_memory once the server has no lazy frees pending (a flushed or trimmed dataset frees in the background). */
export async function usedMemory(admin: Redis): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const m = await infoSection(admin, 'memory');
    if (Number(m.lazyfree_pending_objects ?? 0) === 0) return Number(m.used_memory);
    await sleep(50);
  }
  return Number((await infoSection(admin, 'memory')).used_memory);
}

export interface DepthResult {
  rate: number;
  cpuUsPerJob: number;
  /** Set when `drain`: used_memory growth per waiting job, and what is left once all are processed. */
  memPerJob?: number;
  leftBytes?: number;
}

/**
 * Fills `depth` waiting jobs (100-byte payload, removeOnComplete), then `measured` more, and
 * processes `measured` at concurrency 10: the backlog stays at least `depth` deep throughout.
 * With `drain`, it then processes everything left (concurrency 50, faster) and reads used_memory
 * against the baseline taken before the fill (the queue's structures already created).
 */
export async function backlogDepth(sys: System, url: string, admin: Redis, depth: number, measured: number, drain: boolean): Promise<DepthResult> {
  const job: BenchJob = { name: 'bench', data: PAYLOAD_100, opts: { removeOnComplete: true } };
  // the baseline has the queue's structures (one job added) and no client but `admin`, as at the end
  const first = await sys.producer(url, QUEUE);
  await first.addOne(job).finally(() => first.close());
  const before = await usedMemory(admin);
  const p = await sys.producer(url, QUEUE);
  let memPerJob: number | undefined;
  try {
    await fill(p, depth, job);
    if (drain) memPerJob = ((await usedMemory(admin)) - before) / depth;
    await fill(p, measured, job);
  } finally {
    await p.close();
  }
  const total = 1 + depth + measured;
  const r = await run(sys, url, 10, measured, 60_000, admin);
  const out: DepthResult = { rate: r.rate, cpuUsPerJob: r.cost?.cpuUsPerJob ?? NaN, memPerJob };
  if (drain) {
    // r.jobs counts every completion up to the worker's close, so the rest is exactly known
    const rest = total - r.jobs;
    if (rest > 0) {
      const d = await run(sys, url, 50, rest, 240_000);
      if (d.jobs < rest) throw new Error(`drain stopped at ${d.jobs} of ${rest} jobs`);
    }
    out.leftBytes = (await usedMemory(admin)) - before;
  }
  return out;
}

/** Server commands that are the bench's own and never the system's. */
const ADMIN_COMMANDS = new Set(['slowlog', 'info', 'config', 'multi', 'exec', 'flushall', 'ping']);

/**
 * The longest single command the server ran while `during` ran, by SLOWLOG (threshold `thresholdUs`,
 * read and reset every 250 ms so the log never overflows). ms; `thresholdUs`/1000 when none was slower.
 */
export async function longestCall<T>(admin: Redis, thresholdUs: number, during: () => Promise<T>): Promise<{ maxMs: number; value: T; slowest: string }> {
  const saved = (await admin.config('GET', 'slowlog-*')) as string[];
  await admin.config('SET', 'slowlog-log-slower-than', String(thresholdUs), 'slowlog-max-len', '10000');
  await admin.slowlog('RESET');
  let maxUs = 0;
  let slowest = '';
  const read = async () => {
    const replies = (await admin.multi().slowlog('GET', -1).slowlog('RESET').exec()) ?? [];
    const entries = (replies[0]?.[1] ?? []) as [number, number, number, string[]][];
    for (const [, , us, args] of entries) {
      const name = String(args[0] ?? '').toLowerCase();
      if (ADMIN_COMMANDS.has(name)) continue;
      if (us > maxUs) {
        maxUs = us;
        slowest = args.slice(0, 2).join(' ');
      }
    }
  };
  let polling = true;
  const poller = (async () => {
    while (polling) {
      await sleep(250);
      await read();
    }
  })();
  try {
    const value = await during();
    return { value, maxMs: Math.max(maxUs, thresholdUs) / 1000, slowest };
  } finally {
    polling = false;
    await poller;
    await read();
    const args: string[] = [];
    for (let i = 0; i + 1 < saved.length; i += 2) args.push(saved[i], saved[i + 1]);
    if (args.length) await admin.config('SET', ...(args as [string, string]));
  }
}

export interface DelayedResult {
  /** ms from the moment all jobs were due to the last completion. */
  drainMs: number;
  maxCallMs: number;
  slowest: string;
  /** ms the fill ran past the due time (0 when it finished in time). */
  late: number;
}

/**
 * Adds `n` delayed jobs (removeOnComplete) all due at one moment `leadMs` after the fill is
 * expected to end (its speed probed on another queue first), starts a concurrency-10 worker before
 * that moment and times from it to the last completion, with the longest server call meanwhile.
 */
export async function delayedBurst(sys: System, url: string, admin: Redis, n: number, leadMs: number): Promise<DelayedResult> {
  const probe = await sys.producer(url, `${QUEUE}-probe`);
  let perBatch: number;
  try {
    const t = performance.now();
    await fill(probe, BULK, { name: 'bench', data: { i: 0 }, opts: { delay: 3_600_000 } as BenchJob['opts'] });
    perBatch = performance.now() - t;
  } finally {
    await probe.close();
  }
  const dueAt = Date.now() + leadMs + Math.ceil(n / BULK) * perBatch * 1.5;
  const p = await sys.producer(url, QUEUE);
  try {
    for (let done = 0; done < n; done += BULK) {
      const opts = { removeOnComplete: true, delay: Math.max(1, dueAt - Date.now()) } as BenchJob['opts'];
      const batch: BenchJob[] = [];
      for (let i = 0; i < Math.min(BULK, n - done); i++) batch.push({ name: 'bench', data: { i: done + i }, opts });
      await p.addBulk(batch);
    }
  } finally {
    await p.close();
  }
  const late = Math.max(0, Date.now() - dueAt);
  let completed = 0;
  let tLast = 0;
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const { maxMs, slowest } = await longestCall(admin, 100, async () => {
    const w = await sys.worker(url, QUEUE, 10, () => {
      completed++;
      tLast = Date.now();
      if (completed >= n) finish();
    });
    const guard = setTimeout(finish, Math.max(0, dueAt - Date.now()) + 120_000);
    await finished;
    clearTimeout(guard);
    await w.close();
  });
  if (completed < n) throw new Error(`only ${completed} of ${n} delayed jobs were processed`);
  return { drainMs: tLast - dueAt, maxCallMs: maxMs, slowest, late };
}

/**
 * A producer that takes `bytes`-sized job data: glidemq's Queue refuses data over 512 KiB unless
 * maxPayloadBytes says more (BullMQ has no such limit).
 */
async function bigProducer(sys: System, url: string, bytes: number): Promise<Producer> {
  if (sys.name !== 'glidemq') return sys.producer(url, QUEUE);
  const q = new Queue(QUEUE, { connection: url, maxPayloadBytes: Math.max(bytes * 2, 1 << 20) });
  await q.waitUntilReady();
  return { addOne: (j) => q.add(j.name, j.data, j.opts), addBulk: (jobs) => q.addBulk(jobs), close: () => q.close() };
}

/** Jobs/s and MB/s (10^6 bytes of job data) processing `jobs` jobs of `bytes` of JSON data at concurrency 10. */
export async function payloadRate(sys: System, url: string, bytes: number, jobs: number, maxMs: number): Promise<{ rate: number; mbs: number }> {
  // {"p":"xxx…"} is 8 bytes of JSON around the string
  const job: BenchJob = { name: 'bench', data: { p: 'x'.repeat(bytes - 8) }, opts: { removeOnComplete: true } };
  const p = await bigProducer(sys, url, bytes);
  try {
    await fill(p, jobs, job, Math.max(1, Math.min(BULK, Math.floor((8 << 20) / bytes))));
  } finally {
    await p.close();
  }
  const r = await run(sys, url, 10, jobs, maxMs);
  return { rate: r.rate, mbs: (r.rate * bytes) / 1e6 };
}
