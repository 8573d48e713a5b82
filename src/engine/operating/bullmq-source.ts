/**
 * Reading a BullMQ queue's keys (BullMQ 5 and 6, as node_modules/bullmq/dist/esm/commands/*.lua
 * write them), read-only, for `glidemq import-bullmq`. Its keys are `<prefix>:<queue>:<suffix>`
 * (no hash tag): lists wait, paused (the legacy paused list) and active, sorted sets prioritized
 * (score priority * 2^32 + a counter), delayed (score run time * 2^12 + a counter), completed and
 * failed (score finishedOn), repeat (score next run, member the scheduler id); the meta hash
 * (paused = 1 while paused); one hash per job at `<prefix>:<queue>:<id>` and its log lines at
 * `...:<id>:logs`; a job scheduler's hash at `...:repeat:<id>`.
 */
import type { Client } from '../connecting/connection.js';

/** The states a BullMQ job is read from; `paused` is the legacy paused list (BullMQ 6.7 keeps a paused queue's jobs in wait). */
export type BullState = 'wait' | 'paused' | 'prioritized' | 'delayed' | 'completed' | 'failed';
export const BULL_STATES: readonly BullState[] = ['wait', 'paused', 'prioritized', 'delayed', 'completed', 'failed'];

/** The only place that spells BullMQ's key names. */
export class BullKeys {
  readonly base: string;
  constructor(
    readonly queue: string,
    readonly prefix = 'bull',
  ) {
    this.base = `${prefix}:${queue}`;
  }
  state(s: BullState | 'active' | 'waiting-children') { return `${this.base}:${s}`; }
  get meta() { return `${this.base}:meta`; }
  /** The job id counter. */
  get id() { return `${this.base}:id`; }
  get repeat() { return `${this.base}:repeat`; }
  scheduler(id: string) { return `${this.base}:repeat:${id}`; }
  job(id: string) { return `${this.base}:${id}`; }
  logs(id: string) { return `${this.base}:${id}:logs`; }
  lock(id: string) { return `${this.base}:${id}:lock`; }
  /** The name a BullMQ worker of this queue gives its connections (CLIENT SETNAME): this, or this + ':w:' + its name. */
  get workerClientName() { return `${this.prefix}:${Buffer.from(this.queue).toString('base64')}`; }
}

/** One BullMQ job as read: its id, where it was, its hash and its log lines. */
export interface BullJob {
  id: string;
  state: BullState;
  /** delayed: the run time the delayed set holds (ms since the epoch). */
  runAt?: number;
  hash: Record<string, string>;
  logs: string[];
}

/** One job scheduler (or repeatable job) as read from the repeat set and its hash. */
export interface BullScheduler {
  id: string;
  nextRun: number;
  hash: Record<string, string>;
}

/** Why the queue may be in use: BullMQ worker connections and jobs active (held under a lock). */
export interface BullActivity {
  workers: string[];
  active: number;
  locked: number;
}

const PAGE = 500;

/** Ids in each state (in the order they run: the wait list's oldest first), and delayed run times. */
export async function readStateIds(client: Client, k: BullKeys): Promise<Map<BullState, { id: string; runAt?: number }[]>> {
  const out = new Map<BullState, { id: string; runAt?: number }[]>();
  for (const s of ['wait', 'paused'] as const) {
    // LPUSH adds, the worker takes from the right: the right end is the oldest
    out.set(s, (await client.lrange(k.state(s), 0, -1)).reverse().map((id) => ({ id })));
  }
  out.set('prioritized', (await client.zrange(k.state('prioritized'), '0', '-1')).map((id) => ({ id })));
  const delayed = await client.zrange(k.state('delayed'), '0', '-1', 'WITHSCORES');
  const d: { id: string; runAt?: number }[] = [];
  for (let i = 0; i < delayed.length; i += 2) d.push({ id: delayed[i], runAt: Math.floor(Number(delayed[i + 1]) / 0x1000) });
  out.set('delayed', d);
  for (const s of ['completed', 'failed'] as const) out.set(s, (await client.zrange(k.state(s), '0', '-1')).map((id) => ({ id })));
  return out;
}

/** The hashes and logs of `ids` (a job whose hash is gone is left out), read PAGE at a time. */
export async function readJobs(client: Client, k: BullKeys, state: BullState, ids: { id: string; runAt?: number }[]): Promise<BullJob[]> {
  const jobs: BullJob[] = [];
  for (let at = 0; at < ids.length; at += PAGE) {
    const page = ids.slice(at, at + PAGE);
    const p = client.pipeline();
    for (const { id } of page) {
      p.hgetall(k.job(id));
      p.lrange(k.logs(id), 0, -1);
    }
    const replies = (await p.exec()) ?? [];
    page.forEach(({ id, runAt }, i) => {
      const [hErr, hash] = replies[2 * i] ?? [];
      const [lErr, logs] = replies[2 * i + 1] ?? [];
      if (hErr) throw hErr;
      if (lErr) throw lErr;
      const h = hash as Record<string, string>;
      if (!h || Object.keys(h).length === 0) return;
      jobs.push({ id, state, ...(runAt !== undefined ? { runAt } : {}), hash: h, logs: logs as string[] });
    });
  }
  return jobs;
}

export async function readSchedulers(client: Client, k: BullKeys): Promise<BullScheduler[]> {
  const all = await client.zrange(k.repeat, '0', '-1', 'WITHSCORES');
  const out: BullScheduler[] = [];
  for (let i = 0; i < all.length; i += 2) {
    out.push({ id: all[i], nextRun: Number(all[i + 1]), hash: await client.hgetall(k.scheduler(all[i])) });
  }
  return out;
}

/** Whether the queue has left a trace: its meta hash or its id counter (a queue that never held a job has neither). */
export async function queueExists(client: Client, k: BullKeys): Promise<boolean> {
  return (await client.exists(k.meta, k.id)) > 0;
}

/** Parents waiting for their children (flows), which the import does not copy. */
export async function waitingChildrenCount(client: Client, k: BullKeys): Promise<number> {
  return client.zcard(k.state('waiting-children'));
}

export async function isPaused(client: Client, k: BullKeys): Promise<boolean> {
  return (await client.hget(k.meta, 'paused')) !== null;
}

/** BullMQ workers connected for this queue (by their client names), and its active and locked jobs. */
export async function readActivity(client: Client, k: BullKeys): Promise<BullActivity> {
  const name = k.workerClientName;
  let workers: string[] = [];
  try {
    const list = String(await client.call('CLIENT', 'LIST'));
    workers = list
      .split('\n')
      .map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '')
      .filter((n) => n === name || n.startsWith(`${name}:w:`));
  } catch {
    // CLIENT LIST refused (a managed service): active jobs and locks still tell
  }
  const active = await client.lrange(k.state('active'), 0, -1);
  let locked = 0;
  if (active.length) {
    const p = client.pipeline();
    for (const id of active) p.exists(k.lock(id));
    locked = ((await p.exec()) ?? []).filter(([, n]) => Number(n) === 1).length;
  }
  return { workers, active: active.length, locked };
}
