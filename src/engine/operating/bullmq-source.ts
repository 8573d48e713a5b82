/**
 * Reading a BullMQ queue's keys (BullMQ 5 and 6, as node_modules/bullmq/dist/esm/commands/*.lua
 * write them), read-only, for `glidemq import-bullmq`. Its keys are `<prefix>:<queue>:<suffix>`
 * (no hash tag; on a cluster BullMQ is given a hash-tagged prefix such as `{bull}`, which puts
 * every key of every queue of that prefix in one slot): lists wait, paused (the legacy paused list) and active, sorted sets prioritized
 * (score priority * 2^32 + a counter), delayed (score run time * 2^12 + a counter), completed and
 * failed (score finishedOn), waiting-children (parents waiting for their children), repeat
 * (score next run, member the scheduler id); the meta hash (paused = 1 while paused); one hash per
 * job at `<prefix>:<queue>:<id>` (a child's parentKey and parent, a deduplicated job's deid), its
 * log lines at `...:<id>:logs`, a parent's children at `...:<id>:dependencies` (set of job keys),
 * `...:processed` (hash: job key -> return value) and `...:failed` (hash: job key -> reason, the
 * children ignored on failure); a dedup key at `...:de:<dedup id>` (the job id, with the window as
 * its TTL); a job scheduler's hash at `...:repeat:<id>`.
 */
import { isCluster, type Client } from '../connecting/connection.js';

/** The states a BullMQ job is read from; `paused` is the legacy paused list (BullMQ 6.7 keeps a paused queue's jobs in wait). */
export type BullState = 'waiting-children' | 'wait' | 'paused' | 'prioritized' | 'delayed' | 'completed' | 'failed';
export const BULL_STATES: readonly BullState[] = ['waiting-children', 'wait', 'paused', 'prioritized', 'delayed', 'completed', 'failed'];

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
  /** A parent's children not settled yet (set of job keys), those that completed (hash: job key -> return value), and those that failed and were ignored (hash: job key -> reason). */
  dependencies(id: string) { return `${this.base}:${id}:dependencies`; }
  processed(id: string) { return `${this.base}:${id}:processed`; }
  failedChildren(id: string) { return `${this.base}:${id}:failed`; }
  /** The deduplication key of dedup id `id` (a string holding the job id, with the window's TTL). */
  dedup(id: string) { return `${this.base}:de:${id}`; }
  /**
   * The queue name and job id of a BullMQ job key `<prefix>:<queue>:<id>` of this prefix (BullMQ
   * refuses ':' in a queue name; an id may hold one), or undefined for a key of another prefix.
   */
  splitJobKey(key: string): { queue: string; id: string } | undefined {
    if (!key.startsWith(`${this.prefix}:`)) return undefined;
    const rest = key.slice(this.prefix.length + 1);
    const colon = rest.indexOf(':');
    if (colon <= 0 || colon === rest.length - 1) return undefined;
    return { queue: rest.slice(0, colon), id: rest.slice(colon + 1) };
  }
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
  /** A parent's children (BullMQ job keys): not settled yet, completed (-> return value), failed and ignored (-> reason). */
  dependencies: string[];
  processed: Record<string, string>;
  failedChildren: Record<string, string>;
  /** The deduplication key the job holds (hash field deid), while it still points at the job: its window's ms left (0: no end). */
  dedup?: { id: string; ttl: number };
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
  // parents first: a child copied before its parent could finish in glidemq before the parent came
  out.set('waiting-children', (await client.zrange(k.state('waiting-children'), '0', '-1')).map((id) => ({ id })));
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
      p.smembers(k.dependencies(id));
      p.hgetall(k.processed(id));
      p.hgetall(k.failedChildren(id));
    }
    const replies = (await p.exec()) ?? [];
    const reply = (i: number) => {
      const [err, v] = replies[i] ?? [];
      if (err) throw err;
      return v;
    };
    page.forEach(({ id, runAt }, i) => {
      const h = reply(5 * i) as Record<string, string>;
      if (!h || Object.keys(h).length === 0) return;
      jobs.push({
        id, state, ...(runAt !== undefined ? { runAt } : {}), hash: h, logs: reply(5 * i + 1) as string[],
        dependencies: reply(5 * i + 2) as string[], processed: reply(5 * i + 3) as Record<string, string>, failedChildren: reply(5 * i + 4) as Record<string, string>,
      });
    });
  }
  await readDedup(client, k, jobs);
  return jobs;
}

/** Sets each job's dedup: the key of its deid, while that key still points at the job, with its window's ms left. */
async function readDedup(client: Client, k: BullKeys, jobs: BullJob[]): Promise<void> {
  const holders = jobs.filter((j) => j.hash.deid);
  if (!holders.length) return;
  const p = client.pipeline();
  for (const j of holders) {
    p.get(k.dedup(j.hash.deid));
    p.pttl(k.dedup(j.hash.deid));
  }
  const replies = (await p.exec()) ?? [];
  holders.forEach((j, i) => {
    const [gErr, pointsAt] = replies[2 * i] ?? [];
    const [tErr, pttl] = replies[2 * i + 1] ?? [];
    if (gErr) throw gErr;
    if (tErr) throw tErr;
    const ms = Number(pttl);
    // -2: gone (between the two reads); -1: no window end
    if (pointsAt === j.id && ms !== -2 && ms !== 0) j.dedup = { id: j.hash.deid, ttl: ms > 0 ? ms : 0 };
  });
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

export async function isPaused(client: Client, k: BullKeys): Promise<boolean> {
  return (await client.hget(k.meta, 'paused')) !== null;
}

/** BullMQ workers connected for this queue (by their client names), and its active and locked jobs. */
export async function readActivity(client: Client, k: BullKeys): Promise<BullActivity> {
  const name = k.workerClientName;
  const workers: string[] = [];
  // a cluster's workers may be connected to any primary: each is asked
  for (const node of isCluster(client) ? client.nodes('master') : [client]) {
    try {
      const list = String(await node.call('CLIENT', 'LIST'));
      workers.push(
        ...list
          .split('\n')
          .map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '')
          .filter((n) => n === name || n.startsWith(`${name}:w:`)),
      );
    } catch {
      // CLIENT LIST refused (a managed service): active jobs and locks still tell
    }
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
