/**
 * The worker registry (lua/workers.lua) and the queue's latency. Each Worker registers itself when
 * it starts, refreshes its entry on a timer (one call per refresh, nothing per job) and removes it
 * on close(); an entry not refreshed expires by the server's clock, so a worker that died without
 * closing disappears on its own. Queue.getWorkers() lists the live ones; `glidemq workers` and
 * `pel` show them.
 */
import { hostname } from 'node:os';
import type { Client } from '../connecting/connection.js';
import { invalid } from '../shared/errors.js';
import { listQueues } from '../connecting/discovery.js';
import { QueueKeys } from '../shared/keys.js';
import { callFunction, LIBRARY_PACKAGE_VERSION } from '../connecting/library.js';
import { CLOSE_CALL_MS, within } from '../shared/waiting.js';

/** One live worker as it registered itself (Queue.getWorkers); times are the server's (ms). */
export interface WorkerInfo {
  /** The worker's consumer name: the owner its claims carry (stream PEL, list claims). */
  id: string;
  host: string;
  pid: number;
  queue: string;
  concurrency: number;
  /** Jobs running at its last refresh. */
  running: number;
  /** When it first registered. */
  startedAt: number;
  /** Its last refresh. */
  lastSeen: number;
  /** When its entry expires unless refreshed again. */
  expiresAt: number;
  /** The glidemq package version it runs. */
  version: string;
}

/** The default time an entry lives unless refreshed (ms); it is refreshed every third of it. */
export const DEFAULT_REGISTRY_TTL = 30_000;

/** The ttl option checked: a whole number of ms from 30 ms to a day. */
export function checkRegistryTtl(ttl: unknown): number {
  if (ttl === undefined) return DEFAULT_REGISTRY_TTL;
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl < 30 || ttl > 86_400_000) {
    throw invalid(`registryTtl must be a whole number of ms from 30 to 86400000, got ${String(ttl)}`);
  }
  return ttl;
}

/** A worker refreshes its entry three times per ttl, so one lost refresh is no expiry. */
export function refreshInterval(ttl: number): number {
  return Math.max(10, Math.floor(ttl / 3));
}

/** One worker's entry: written by register(), which refresh() repeats, removed by unregister(). */
export class WorkerRegistration {
  private inFlight: Promise<void> | undefined;
  private gone = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: () => Client,
    private readonly keys: QueueKeys,
    private readonly id: string,
    private readonly ttl: number,
    private readonly describe: () => { concurrency: number; running: number },
  ) {}

  /**
   * Writes the entry now (so getWorkers lists the worker once this resolved), then refreshes it on
   * its own timer (one call per refresh, never per job); a failure goes to `onError` and the next
   * refresh tries again.
   */
  async start(onError: (err: unknown) => void): Promise<void> {
    const register = () => this.refresh().catch(onError);
    this.timer = setInterval(() => void register(), refreshInterval(this.ttl));
    await register();
  }

  /**
   * Writes the entry (first time or refresh). One at a time: a refresh while one waits joins it.
   * After unregister() it writes nothing (a late timer must not bring a closed worker back).
   */
  refresh(): Promise<void> {
    if (this.gone) return Promise.resolve();
    this.inFlight ??= this.write().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async write(): Promise<void> {
    const d = this.describe();
    const info = {
      host: hostname(),
      pid: process.pid,
      queue: this.keys.queue,
      concurrency: d.concurrency,
      running: d.running,
      version: LIBRARY_PACKAGE_VERSION,
    };
    await callFunction(this.client(), 'glidemq_registerWorker', this.keys.meta, [this.id, JSON.stringify(info), this.ttl]);
  }

  /** Writes nothing more (a close that cannot reach the server: the entry expires on its own). */
  stop(): void {
    clearInterval(this.timer);
    this.gone = true;
  }

  /**
   * The worker closes: the entry is removed on a reachable server (waited for a short while), else
   * nothing more is written (it expires by itself after registryTtl).
   */
  async leave(reachable: boolean): Promise<void> {
    if (!reachable) return this.stop();
    await within(this.unregister().catch(() => undefined), CLOSE_CALL_MS);
  }

  /** Removes the entry (after any refresh on its way). */
  async unregister(): Promise<void> {
    clearInterval(this.timer);
    this.gone = true;
    await this.inFlight?.catch(() => undefined);
    await callFunction(this.client(), 'glidemq_unregisterWorker', this.keys.meta, [this.id]);
  }
}

/** The live workers of a queue, expired entries dropped (the one expiring first first). */
export async function listWorkers(client: Client, keys: QueueKeys): Promise<WorkerInfo[]> {
  return (await readWorkers(client, keys)).workers;
}

/**
 * The live workers and the server's now (ms) when they were read, to show ages by the server's
 * clock.
 */
export interface WorkersReading {
  now: number;
  workers: WorkerInfo[];
}

export async function readWorkers(client: Client, keys: QueueKeys): Promise<WorkersReading> {
  const reply = (await callFunction(client, 'glidemq_listWorkers', keys.meta, [])) as unknown[];
  const workers: WorkerInfo[] = [];
  for (const text of reply.slice(1)) {
    const w = decodeInfo(String(text), keys.queue);
    if (w) workers.push(w);
  }
  return { now: Number(reply[0]), workers };
}

/**
 * The live workers of every queue under `prefix` (listQueues finds them, on every primary of a
 * cluster), by queue then host, pid; `now` is the latest server time of the readings.
 */
export async function readAllWorkers(client: Client, prefix: string): Promise<WorkersReading> {
  const names = await listQueues(client, prefix);
  const readings = await Promise.all(names.map((name) => readWorkers(client, new QueueKeys(name, prefix))));
  const workers = readings.flatMap((r) => r.workers);
  workers.sort((a, b) => a.queue.localeCompare(b.queue) || a.host.localeCompare(b.host) || a.pid - b.pid || a.id.localeCompare(b.id));
  return { now: Math.max(0, ...readings.map((r) => r.now)), workers };
}

/** An entry as stored; undefined for one that is not a worker's (another program wrote it). */
function decodeInfo(text: string, queue: string): WorkerInfo | undefined {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (o === null || typeof o !== 'object' || typeof o.id !== 'string') return undefined;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  const s = (v: unknown) => (typeof v === 'string' ? v : '');
  return {
    id: o.id,
    host: s(o.host),
    pid: n(o.pid),
    queue: s(o.queue) || queue,
    concurrency: n(o.concurrency),
    running: n(o.running),
    startedAt: n(o.startedAt),
    // lastBeat: an entry an older library wrote (a rolling upgrade)
    lastSeen: n(o.lastSeen ?? o.lastBeat),
    expiresAt: n(o.expiresAt),
    version: s(o.version),
  };
}

/**
 * Ms since the oldest waiting job became waiting, by the server's clock; null when none waits.
 * Exact for the job stream and the LIFO list; sampled for prioritized jobs and groups (see
 * lua/workers.lua glidemq_oldestWaiting for what is looked at). A paused queue's jobs count: they
 * wait.
 */
export async function oldestWaitingAge(client: Client, keys: QueueKeys): Promise<number | null> {
  const age = Number(await callFunction(client, 'glidemq_oldestWaiting', keys.meta, []));
  return Number.isFinite(age) && age >= 0 ? age : null;
}
