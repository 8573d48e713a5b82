/**
 * The two queues under test behind one small interface, so every figure runs the same workload
 * against glidemq and against BullMQ. Each side uses its library the way its documentation shows.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Queue as BullQueue, QueueEvents as BullQueueEvents, Worker as BullWorker } from 'bullmq';
import { Queue, QueueEvents, Worker } from '../../src/index.js';

export type SystemName = 'glidemq' | 'BullMQ';

export interface BenchJob {
  name: string;
  data: unknown;
  opts?: { removeOnComplete?: boolean; delay?: number };
}

export interface Producer {
  addOne(job: BenchJob): Promise<unknown>;
  /** One library call for all of `jobs`. */
  addBulk(jobs: BenchJob[]): Promise<unknown>;
  close(): Promise<void>;
}

export interface RunningWorker {
  close(): Promise<void>;
}

export interface System {
  name: SystemName;
  producer(url: string, queue: string): Promise<Producer>;
  /**
   * Starts a worker with a no-op processor; `onCompleted` sees each finished job's data. With
   * `onStart`, the processor awaits it with the job's data first (the other figures keep the bare no-op).
   * With `sandbox`, the no-op is a processor file run in the system's sandbox of that kind.
   */
  worker(url: string, queue: string, concurrency: number, onCompleted: (data: any) => void, onStart?: OnStart, sandbox?: SandboxKind): Promise<RunningWorker>;
  /** Starts the system's QueueEvents on the queue with a `completed` listener; resolves once it reads. */
  listen(url: string, queue: string): Promise<RunningWorker>;
}

let tlsCaPath: string | undefined;
let tlsCaPem: Buffer | undefined;

/**
 * The certificate authority both systems trust for rediss:// URLs (the bench's TLS server uses
 * certificates it makes at start). glidemq takes the file; BullMQ takes ioredis `tls` options.
 */
export function trustTlsCa(path: string): void {
  tlsCaPath = path;
  tlsCaPem = readFileSync(path);
}

/** glidemq's connection option for a bench URL. */
function glidemqConnection(url: string): string | { url: string; tlsCa?: string } {
  return url.startsWith('rediss:') ? { url, tlsCa: tlsCaPath } : url;
}

/** BullMQ's connection option (ioredis options) for a bench URL. */
function hostPort(url: string): { host: string; port: number; tls?: { ca?: Buffer[] } } {
  const u = new URL(url);
  const tls = u.protocol === 'rediss:' ? { tls: tlsCaPem ? { ca: [tlsCaPem] } : {} } : {};
  return { host: u.hostname, port: Number(u.port), ...tls };
}

export type OnStart = (data: any) => Promise<void>;

/** Where a sandboxed row runs the no-op processor file: child processes, or worker threads. */
export type SandboxKind = 'process' | 'thread';

/** The no-op processor file of the sandboxed rows (noop-processor.ts). */
const NOOP_FILE = fileURLToPath(new URL('./noop-processor.js', import.meta.url));

const noop = async () => null;

/** The processor a worker runs: the no-op, or one that awaits `onStart` first. */
function processorFor(onStart: OnStart | undefined): (job: { data: any }) => Promise<null> {
  if (!onStart) return noop;
  return async (job) => {
    await onStart(job.data);
    return null;
  };
}

export const glidemq: System = {
  name: 'glidemq',
  async producer(url, queue) {
    const q = new Queue(queue, { connection: glidemqConnection(url) });
    await q.waitUntilReady();
    return {
      addOne: (j) => q.add(j.name, j.data, j.opts),
      addBulk: (jobs) => q.addBulk(jobs),
      close: () => q.close(),
    };
  },
  async worker(url, queue, concurrency, onCompleted, onStart, sandbox) {
    const processor = sandbox ? NOOP_FILE : processorFor(onStart);
    const w = new Worker(queue, processor, { connection: glidemqConnection(url), concurrency, autorun: false, useWorkerThreads: sandbox === 'thread' });
    w.on('completed', (job) => onCompleted(job.data));
    w.on('error', (err) => console.error(`glidemq worker error: ${String(err)}`));
    w.run().catch(() => undefined); // settles at close
    await w.waitUntilReady();
    return { close: () => w.close() };
  },
  async listen(url, queue) {
    const qe = new QueueEvents(queue, { connection: glidemqConnection(url) });
    let completed = 0;
    qe.on('completed', () => void completed++);
    qe.on('error', (err) => console.error(`glidemq QueueEvents error: ${String(err)}`));
    await qe.waitUntilReady();
    return { close: () => qe.close() };
  },
};

export const bullmq: System = {
  name: 'BullMQ',
  async producer(url, queue) {
    const q = new BullQueue(queue, { connection: hostPort(url) });
    await q.waitUntilReady();
    return {
      addOne: (j) => q.add(j.name, j.data, j.opts),
      addBulk: (jobs) => q.addBulk(jobs),
      close: () => q.close(),
    };
  },
  async worker(url, queue, concurrency, onCompleted, onStart, sandbox) {
    const processor = sandbox ? NOOP_FILE : processorFor(onStart);
    const w = new BullWorker(queue, processor, { connection: hostPort(url), concurrency, autorun: false, useWorkerThreads: sandbox === 'thread' });
    w.on('completed', (job) => onCompleted(job.data));
    w.on('error', (err) => console.error(`BullMQ worker error: ${String(err)}`));
    void w.run();
    await w.waitUntilReady();
    return { close: () => w.close() };
  },
  async listen(url, queue) {
    const qe = new BullQueueEvents(queue, { connection: hostPort(url) });
    let completed = 0;
    qe.on('completed', () => void completed++);
    qe.on('error', (err) => console.error(`BullMQ QueueEvents error: ${String(err)}`));
    await qe.waitUntilReady();
    return { close: () => qe.close() };
  },
};

export const SYSTEMS: System[] = [glidemq, bullmq];
