/**
 * The worker registry (lua/workers.lua) and the queue's latency. Each Worker registers itself when
 * it starts, refreshes its entry on a timer (one call per refresh, nothing per job) and removes it
 * on close(); an entry not refreshed expires by the server's clock, so a worker that died without
 * closing disappears on its own. Queue.getWorkers() lists the live ones; `glidemq workers` and
 * `pel` show them. Each refresh also says which jobs the worker runs (a few ids), and its reply
 * carries what an operator asked of the worker from afar (Queue.quietWorker / stopWorker,
 * `glidemq workers --quiet|--stop`): the worker obeys at that refresh.
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
  /** Ids of some of those jobs (at most RUNNING_IDS_KEPT, fewer when they are long). */
  jobs: string[];
  /** What was asked of it from afar: 'quiet' (take no new jobs), 'stop' (finish and close), or null. */
  request: WorkerRequest | null;
  /** When it first registered. */
  startedAt: number;
  /** Its last refresh. */
  lastSeen: number;
  /** When its entry expires unless refreshed again. */
  expiresAt: number;
  /** The glidemq package version it runs. */
  version: string;
}

/** What an operator may ask of a worker through the registry. */
export type WorkerRequest = 'quiet' | 'stop';

/** Running job ids an entry keeps, at most (their count is `running`). */
export const RUNNING_IDS_KEPT = 10;
/** Characters of running job ids an entry keeps, at most (the entry holds 4096 bytes). */
const RUNNING_IDS_CHARS = 2048;

/** Some of `ids` for the entry: the first few, within RUNNING_IDS_KEPT and RUNNING_IDS_CHARS. */
function someIds(ids: Iterable<string>): string[] {
  const kept: string[] = [];
  let chars = 0;
  for (const id of ids) {
    if (kept.length === RUNNING_IDS_KEPT || chars + id.length > RUNNING_IDS_CHARS) break;
    kept.push(id);
    chars += id.length;
  }
  return kept;
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
    private readonly describe: () => { concurrency: number; running: number; jobs?: Iterable<string> },
    /** Told what an operator asked of this worker, at each refresh that finds a request. */
    private readonly hear: (request: WorkerRequest) => void = () => undefined,
    /** How often the entry is refreshed (ms): by default a third of the ttl. */
    private readonly every = refreshInterval(ttl),
  ) {}

  /**
   * Writes the entry now (so getWorkers lists the worker once this resolved), then refreshes it on
   * its own timer (one call per refresh, never per job); a failure goes to `onError` and the next
   * refresh tries again.
   */
  async start(onError: (err: unknown) => void): Promise<void> {
    const register = () => this.refresh().catch(onError);
    this.timer = setInterval(() => void register(), this.every);
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
      jobs: someIds(d.jobs ?? []),
      version: LIBRARY_PACKAGE_VERSION,
    };
    const reply = await callFunction(this.client(), 'glidemq_registerWorker', this.keys.meta, [this.id, JSON.stringify(info), this.ttl]);
    const request = Array.isArray(reply) ? String(reply[1]) : '';
    if (!this.gone && (request === 'quiet' || request === 'stop')) this.hear(request);
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

/**
 * Asks live worker `id` of the queue to go quiet or to stop; false when no live worker of the
 * queue has that id (nothing is written then). The worker obeys at its next refresh.
 */
export async function requestWorker(client: Client, keys: QueueKeys, id: string, request: WorkerRequest): Promise<boolean> {
  if (request !== 'quiet' && request !== 'stop') throw invalid(`a worker request is 'quiet' or 'stop', got ${String(request)}`);
  if (typeof id !== 'string' || id === '') throw invalid('a worker id is its consumer name (glidemq workers --json shows it), got an empty one');
  return Number(await callFunction(client, 'glidemq_requestWorker', keys.meta, [id, request])) === 1;
}

/**
 * Asks live worker `id`, of whichever queue under `prefix` it serves, to go quiet or to stop: the
 * queue it serves, or undefined when no live worker has that id.
 */
export async function requestAnyWorker(client: Client, prefix: string, id: string, request: WorkerRequest): Promise<string | undefined> {
  const { workers } = await readAllWorkers(client, prefix);
  const w = workers.find((x) => x.id === id);
  if (!w) return undefined;
  return (await requestWorker(client, new QueueKeys(w.queue, prefix), id, request)) ? w.queue : undefined;
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
    // (an empty list comes back from the server's JSON as {})
    jobs: Array.isArray(o.jobs) ? o.jobs.filter((x): x is string => typeof x === 'string') : [],
    request: o.request === 'quiet' || o.request === 'stop' ? o.request : null,
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
