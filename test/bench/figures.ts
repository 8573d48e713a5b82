/**
 * One measurement per function, each for one queue system on a flushed server. Every loop is
 * bounded in time, so a slow system or a slow disk makes a figure less precise, never a run longer.
 */
import type { Redis } from 'ioredis';
import { commandStats, infoSection, percentile, SCRIPT_COMMANDS, sentCommands, serverCpuSeconds, sleep } from './measure.js';
import type { BenchJob, SandboxKind, System } from './systems.js';

export interface Sizes {
  serialMs: number;
  bulkJobs: number;
  backlog: number;
  processMaxMs: number;
  /** Backlog and time bound of the durability and proxy runs (several per round). */
  sideBacklog: number;
  sideMaxMs: number;
  latencyMs: number;
  latencyRate: number;
  /** Delayed jobs of the lateness figure, one added every DELAY_SPACING_MS. */
  delayJobs: number;
  memJobs: number;
  ndjsonLines: number;
  cliRuns: number;
}

export const BULK = 1000;
const QUEUE = 'bench';
/** JSON text of exactly 100 bytes: {"p":"xxxx…"} */
export const PAYLOAD_100 = { p: 'x'.repeat(92) };

function jobs(n: number, from: number, opts?: BenchJob['opts']): BenchJob[] {
  const out: BenchJob[] = [];
  for (let i = 0; i < n; i++) out.push({ name: 'bench', data: { i: from + i }, opts });
  return out;
}

/** Jobs/s of awaited single adds, after a short warm-up. */
export async function serialAdds(sys: System, url: string, s: Sizes): Promise<number> {
  const p = await sys.producer(url, QUEUE);
  try {
    for (let i = 0; i < 200; i++) await p.addOne({ name: 'bench', data: { i } });
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < s.serialMs) {
      await p.addOne({ name: 'bench', data: { i: n } });
      n++;
    }
    return (n * 1000) / (performance.now() - t0);
  } finally {
    await p.close();
  }
}

/** Jobs/s of awaited bulk adds of BULK jobs per call. */
export async function bulkAdds(sys: System, url: string, s: Sizes): Promise<number> {
  const p = await sys.producer(url, QUEUE);
  try {
    await p.addBulk(jobs(BULK, 0));
    const batches = Math.max(1, Math.round(s.bulkJobs / BULK));
    const prepared = Array.from({ length: batches }, (_, b) => jobs(BULK, (b + 1) * BULK));
    const t0 = performance.now();
    let n = 0;
    for (const batch of prepared) {
      await p.addBulk(batch);
      n += batch.length;
      if (performance.now() - t0 > s.processMaxMs) break;
    }
    return (n * 1000) / (performance.now() - t0);
  } finally {
    await p.close();
  }
}

/** Adds `n` tiny jobs (removed on completion) before a processing run; not timed. */
export async function preload(sys: System, url: string, n: number): Promise<void> {
  const p = await sys.producer(url, QUEUE);
  try {
    for (let done = 0; done < n; done += BULK) await p.addBulk(jobs(Math.min(BULK, n - done), done, { removeOnComplete: true }));
  } finally {
    await p.close();
  }
}

export interface ProcessResult {
  rate: number;
  jobs: number;
  /** Set when `admin` was given: the server's cost over the run. */
  cost?: {
    clientCommandsPerJob: number;
    serverCallsPerJob: number;
    cpuUsPerJob: number;
    clientCpuUsPerJob: number;
    scriptUsPerJob: number;
    sent: Record<string, number>;
  };
}

/**
 * Processes a preloaded backlog with a no-op processor; rate = jobs/s between the first and the
 * last completion (worker start-up excluded), the run ending at the backlog's end or maxMs. With
 * `sandbox`, the no-op is a processor file run in the system's sandbox of that kind.
 */
export async function processBacklog(
  sys: System,
  url: string,
  concurrency: number,
  s: Sizes,
  admin?: Redis,
  sandbox?: SandboxKind,
): Promise<ProcessResult> {
  let done = 0;
  let tFirst = 0;
  let tLast = 0;
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const onCompleted = () => {
    tLast = performance.now();
    if (done === 0) tFirst = tLast;
    done++;
    if (done >= s.backlog || tLast - tFirst >= s.processMaxMs) finish();
  };
  let cpu0 = 0;
  let client0: NodeJS.CpuUsage | undefined;
  if (admin) {
    await admin.config('RESETSTAT');
    cpu0 = await serverCpuSeconds(admin);
    sentCommands.start();
    client0 = process.cpuUsage();
  }
  const w = await sys.worker(url, QUEUE, concurrency, onCompleted, undefined, sandbox);
  const guard = setTimeout(finish, s.processMaxMs + 10_000);
  await finished;
  clearTimeout(guard);
  let cost: ProcessResult['cost'];
  if (admin) {
    sentCommands.stop();
    const client = process.cpuUsage(client0);
    const jobsSeen = done;
    const cpu1 = await serverCpuSeconds(admin);
    const stats = await commandStats(admin);
    let calls = 0;
    let scriptUsec = 0;
    for (const [name, st] of stats) {
      if (name === 'config|resetstat' || name === 'info') continue;
      calls += st.calls;
      if (SCRIPT_COMMANDS.has(name)) scriptUsec += st.usec;
    }
    cost = {
      clientCommandsPerJob: sentCommands.total / jobsSeen,
      serverCallsPerJob: calls / jobsSeen,
      cpuUsPerJob: ((cpu1 - cpu0) * 1e6) / jobsSeen,
      clientCpuUsPerJob: (client.user + client.system) / jobsSeen,
      scriptUsPerJob: scriptUsec / jobsSeen,
      sent: Object.fromEntries(sentCommands.byName),
    };
  }
  await w.close();
  const rate = done > 1 && tLast > tFirst ? ((done - 1) * 1000) / (tLast - tFirst) : NaN;
  return { rate, jobs: done, cost };
}

/**
 * processBacklog at concurrency `concurrency` while the system's QueueEvents listens to `completed`
 * (glidemq writes its per-job events only while one listens: lua/events.lua).
 */
export async function processListened(sys: System, url: string, concurrency: number, s: Sizes, admin?: Redis): Promise<ProcessResult> {
  const listener = await sys.listen(url, QUEUE);
  try {
    return await processBacklog(sys, url, concurrency, s, admin);
  } finally {
    await listener.close();
  }
}

/** End-to-end latency (add called → worker's completed event) at a steady rate; ms p50/p99. */
export async function steadyLatency(sys: System, url: string, s: Sizes): Promise<{ p50: number; p99: number }> {
  const samples: number[] = [];
  const warmUntil = performance.now() + Math.min(500, s.latencyMs * 0.1);
  let completed = 0;
  const w = await sys.worker(url, QUEUE, 10, (data: { t: number }) => {
    completed++;
    if (data.t >= warmUntil) samples.push(performance.now() - data.t);
  });
  const p = await sys.producer(url, QUEUE);
  let sent = 0;
  const t0 = performance.now();
  const opts = { removeOnComplete: true };
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const elapsed = performance.now() - t0;
      const due = Math.min(Math.floor((elapsed * s.latencyRate) / 1000), Math.floor((s.latencyMs * s.latencyRate) / 1000));
      while (sent < due) {
        sent++;
        void p.addOne({ name: 'bench', data: { t: performance.now() }, opts });
      }
      if (elapsed >= s.latencyMs) {
        clearInterval(tick);
        resolve();
      }
    }, 1);
  });
  const deadline = performance.now() + 10_000;
  while (completed < sent && performance.now() < deadline) await sleep(5);
  await w.close();
  await p.close();
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** The delays (ms) the lateness figure's adds cycle through, and the time between two adds. */
export const DELAYS_MS = [100, 700, 300, 1000, 200, 550, 850, 400, 150, 600];
const DELAY_SPACING_MS = 20;

/** The server's clock (TIME) in ms, with its microseconds. */
async function serverMs(admin: Redis): Promise<number> {
  const [sec, usec] = await admin.time();
  return Number(sec) * 1000 + Number(usec) / 1000;
}

/**
 * How late delayed jobs start (ms; p50/p99). While a worker (concurrency 10) waits, delayJobs jobs
 * are added one every DELAY_SPACING_MS with the delays of DELAYS_MS, so the earliest due job keeps
 * changing; each job's due time is the server's TIME read just before its add plus its delay, its
 * start the server's TIME read first thing in the processor (both through `admin`, so both systems
 * are judged by the one clock, each reading a little after the moment it stands for).
 */
export async function delayLateness(sys: System, url: string, admin: Redis, s: Sizes): Promise<{ p50: number; p99: number }> {
  const late: number[] = [];
  const w = await sys.worker(url, QUEUE, 10, () => undefined, async (data: { due: number }) => {
    late.push((await serverMs(admin)) - data.due);
  });
  const p = await sys.producer(url, QUEUE);
  try {
    for (let i = 0; i < s.delayJobs; i++) {
      const delay = DELAYS_MS[i % DELAYS_MS.length];
      const due = (await serverMs(admin)) + delay;
      await p.addOne({ name: 'bench', data: { due }, opts: { delay, removeOnComplete: true } });
      await sleep(DELAY_SPACING_MS);
    }
    const deadline = performance.now() + Math.max(...DELAYS_MS) + 5000;
    while (late.length < s.delayJobs && performance.now() < deadline) await sleep(5);
    if (late.length < s.delayJobs) throw new Error(`${s.delayJobs - late.length} of ${s.delayJobs} delayed jobs had not started 5 s after their due time`);
  } finally {
    await w.close();
    await p.close();
  }
  return { p50: percentile(late, 50), p99: percentile(late, 99) };
}

/** used_memory growth per waiting job with a 100-byte payload (queue structures created first). */
export async function memoryPerJob(sys: System, url: string, admin: Redis, s: Sizes): Promise<number> {
  const p = await sys.producer(url, QUEUE);
  try {
    await p.addOne({ name: 'bench', data: PAYLOAD_100 });
    const used = async () => Number((await infoSection(admin, 'memory')).used_memory);
    const before = await used();
    for (let done = 0; done < s.memJobs; done += BULK) {
      const batch: BenchJob[] = [];
      for (let i = 0; i < Math.min(BULK, s.memJobs - done); i++) batch.push({ name: 'bench', data: PAYLOAD_100 });
      await p.addBulk(batch);
    }
    return ((await used()) - before) / s.memJobs;
  } finally {
    await p.close();
  }
}
