/**
 * The setup every BullMQ compatibility test file (test/compat) shares: a server for the file,
 * Queue and Worker factories as a BullMQ application builds them, everything made in a test closed
 * after it (last made, first closed), and a plain client for looking at the keys directly.
 */
import type { Redis } from 'ioredis';
import { Queue, Worker, type Processor, type QueueOptions, type WorkerOptions } from '../../src/index.js';
import { uniqueQueue } from './engine.js';
import { useServer, type TestServer } from './valkey.js';

export const HOUR = 3_600_000;

/** A promise and its resolve, to hold a processor until the test lets it go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

/** What `p` (a promise, or a call that may throw or reject) was refused with; fails if it was not. */
export async function rejection(p: Promise<unknown> | (() => unknown)): Promise<Error> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the call to be refused');
}

export interface Compat {
  server: () => TestServer;
  /** This test's plain client (made on first use, closed after the test). */
  redis: () => Redis;
  connection: () => { host: string; port: number };
  /** A Queue with a fresh name (the label given to useCompat, then random hex). */
  queue: (opts?: QueueOptions) => Queue;
  /** A Worker on `q`'s name: blockTimeout 1000, then the file's defaults, then `opts`; errors are swallowed. */
  worker: <R>(q: Queue, processor: Processor<any, R> | string | URL, opts?: Partial<WorkerOptions>) => Worker<any, R>;
  /** Runs `close` after the test, before what was registered earlier. */
  closeLater: (close: () => Promise<unknown>) => void;
  /** The server's clock in ms (the clock the engine stores its times in). */
  serverNow: () => Promise<number>;
}

/**
 * Call once at the top of a describe: starts the file's server and registers the afterEach that
 * closes what the test made. `label` starts each queue's name; `workerDefaults` are the file's
 * Worker options (over blockTimeout 1000).
 */
export function useCompat(label: string, workerDefaults: Partial<WorkerOptions> = {}): Compat {
  const server = useServer();
  const closers: (() => Promise<unknown>)[] = [];
  let client: Redis | undefined;
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
    const c = client;
    client = undefined;
    await c?.quit();
  });
  const closeLater = (close: () => Promise<unknown>) => {
    closers.push(close);
  };
  const redis = () => (client ??= server().client());
  const connection = () => ({ host: '127.0.0.1', port: server().port });
  const queue = (opts: QueueOptions = {}) => {
    const q = new Queue(uniqueQueue(label), { connection: connection(), ...opts });
    closeLater(() => q.close());
    return q;
  };
  const worker = <R>(q: Queue, processor: Processor<any, R> | string | URL, opts: Partial<WorkerOptions> = {}) => {
    const w = new Worker<any, R>(q.name, processor, { connection: connection(), blockTimeout: 1000, ...workerDefaults, ...opts });
    w.on('error', () => undefined);
    closeLater(() => w.close(true));
    return w;
  };
  const serverNow = async () => {
    const [s, us] = await redis().time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  return { server, redis, connection, queue, worker, closeLater, serverNow };
}
