/**
 * Job states and counts as BullMQ applications ask for them (issue 18): a job's state, counts per
 * type (getJobCounts(...types), getJobCountByTypes, count()) and jobs per type in pages
 * (getJobs(types, start, end, asc)). The Queue and Job methods of these names delegate here.
 *
 * The state is the job hash's `state` field: every Lua function that moves a job writes it in
 * the same call, so one HGET answers. Counts come from glidemq_getCounts (lua/query.lua): one
 * read-only call of a few O(1) commands, whatever the queue holds.
 *
 * Paused queues: a waiting job of a paused queue counts under `paused`, not under `waiting` too
 * (getJobCounts). Where BullMQ's "waiting" means every job that waits (getWaitingCount,
 * getJobCountByTypes('waiting'), count(), getJobs('waiting'), job.isWaiting(), getJobState) it
 * includes them, as BullMQ's does: BullMQ 5 adds its paused list to 'waiting', and 6.7 keeps a
 * paused queue's jobs in its wait list.
 */
import type { Client } from './connection.js';
import { invalid } from './errors.js';
import { waitingGroupJobIds } from './groups.js';
import type { Job, JobState } from './job.js';
import { CONSUMER_GROUP, type QueueKeys } from './keys.js';
import { pairsToRecord } from './replies.js';

/** BullMQ's job types: its states, 'wait' (the same as 'waiting'), 'paused' and 'repeat'. */
export type JobType = 'completed' | 'failed' | 'delayed' | 'active' | 'waiting' | 'wait' | 'paused' | 'prioritized' | 'waiting-children' | 'repeat';

/** A state as getJobState and job.getState answer (BullMQ's JobState and 'unknown'). */
export type JobStateName = JobState | 'waiting-children';

const TYPES: readonly string[] = ['completed', 'failed', 'delayed', 'active', 'waiting', 'wait', 'paused', 'prioritized', 'waiting-children', 'repeat'];

/** The types BullMQ counts and lists when none is given. */
const DEFAULT_TYPES: JobType[] = ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting', 'waiting-children'];

/** The states a job hash holds that BullMQ has a name for; any other value is 'unknown'. */
const STATES: readonly string[] = ['completed', 'failed', 'delayed', 'active', 'waiting', 'prioritized'];

/** What a query needs of a queue (a Queue is one). */
export interface QueryTarget {
  readonly client: Client;
  readonly keys: QueueKeys;
}

/** The job `id`'s state now: 'unknown' when there is no such job. */
export async function readJobState(client: Client, keys: QueueKeys, id: string): Promise<JobStateName | 'unknown'> {
  const state = await client.hget(keys.job(id), 'state');
  return state !== null && STATES.includes(state) ? (state as JobStateName) : 'unknown';
}

/** getJobCounts() with no types: every count BullMQ gives, and glidemq's own. */
export interface JobCounts {
  /** Jobs waiting in a running queue (a paused queue's count under `paused`). */
  waiting: number;
  active: number;
  delayed: number;
  prioritized: number;
  completed: number;
  failed: number;
  /** Jobs waiting in a paused queue (0 while it runs); its prioritized jobs stay under `prioritized`. */
  paused: number;
  /** Always 0: glidemq has no parent/child jobs (BullMQ's flows). */
  'waiting-children': number;
  consumers: number;
  isPaused: boolean;
  listActive: number;
}

/** glidemq_getCounts' reply, named (lua/query.lua). `line`: every job that waits, paused or not. */
export interface RawCounts {
  line: number;
  active: number;
  delayed: number;
  prioritized: number;
  completed: number;
  failed: number;
  isPaused: boolean;
  listActive: number;
}

export function decodeCounts(r: number[]): RawCounts {
  return {
    line: r[0],
    active: r[1],
    delayed: r[2],
    prioritized: r[3],
    completed: r[4],
    failed: r[5],
    isPaused: r[6] === 1,
    listActive: r[7],
  };
}

export function allCounts(raw: RawCounts, consumers: number): JobCounts {
  return {
    waiting: raw.isPaused ? 0 : raw.line,
    active: raw.active,
    delayed: raw.delayed,
    prioritized: raw.prioritized,
    completed: raw.completed,
    failed: raw.failed,
    paused: raw.isPaused ? raw.line : 0,
    'waiting-children': 0,
    consumers,
    isPaused: raw.isPaused,
    listActive: raw.listActive,
  };
}

/**
 * The types asked for, checked and without repeats (a string is one type; none: BullMQ's
 * default set). An unknown name is refused rather than counted as 0: a typo would read as empty.
 */
export function checkTypes(types: readonly unknown[] | unknown, op: string): JobType[] {
  const list = typeof types === 'string' ? [types] : Array.isArray(types) ? types : types === undefined ? [] : [types];
  for (const t of list) {
    if (typeof t !== 'string' || !TYPES.includes(t)) {
      throw invalid(`${op}: unknown job type ${JSON.stringify(t)}; use one of ${TYPES.join(', ')}`);
    }
  }
  return list.length ? [...new Set(list as JobType[])] : [...DEFAULT_TYPES];
}

/** One type's count under getJobCounts' rule: a paused queue's waiting jobs count under 'paused' only. */
function countOf(type: JobType, raw: RawCounts, schedulers: number): number {
  switch (type) {
    case 'waiting':
    case 'wait':
      return raw.isPaused ? 0 : raw.line;
    case 'paused':
      return raw.isPaused ? raw.line : 0;
    case 'active':
    case 'delayed':
    case 'prioritized':
    case 'completed':
    case 'failed':
      return raw[type];
    case 'repeat':
      return schedulers;
    default:
      return 0; // 'waiting-children': no flows in glidemq
  }
}

/** getJobCounts(...types) with types: exactly the keys asked for, as they were spelled. */
export function countsOf(types: JobType[], raw: RawCounts, schedulers: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of types) out[t] = countOf(t, raw, schedulers);
  return out;
}

/**
 * getJobCountByTypes: the jobs in any of `types`, each once. 'waiting' ('wait') counts every job
 * that waits, paused or not (BullMQ's getWaitingCount is getJobCountByTypes('waiting') and counts
 * "waiting or paused"); 'paused' adds nothing more then.
 */
export function sumOf(types: JobType[], raw: RawCounts, schedulers: number): number {
  const set = new Set(types.map((t) => (t === 'wait' ? 'waiting' : t)));
  let sum = 0;
  for (const t of set) {
    if (t === 'waiting') sum += raw.line;
    else if (t !== 'paused' || !set.has('waiting')) sum += countOf(t, raw, schedulers);
  }
  return sum;
}

/** `start`..`end` of `ids`, inclusive, negative counting from the end (as ZRANGE and LRANGE take them). */
function slice<T>(ids: T[], start: number, end: number): T[] {
  const from = start < 0 ? Math.max(0, ids.length + start) : start;
  const to = end < 0 ? ids.length + end : end;
  return to < from ? [] : ids.slice(from, to + 1);
}

/** Checks a page's bounds before anything is read. */
export function checkPage(start: unknown, end: unknown, op: string): void {
  for (const [name, v] of [['start', start], ['end', end]] as const) {
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalid(`${op}: ${name} must be a whole number (negative counts from the end), got ${String(v)}`);
  }
}

/**
 * The ids of the jobs that wait, in the order workers take them: LIFO jobs, stream entries not
 * yet delivered to a worker, then the jobs waiting in groups (group by group, each in its order):
 * the jobs glidemq_getCounts counts in its first number, the ones drain removes. With `limit`,
 * at most that many from the front (the later parts are not read once it is reached).
 */
export async function waitingLine(client: Client, keys: QueueKeys, limit?: number): Promise<string[]> {
  const ids = await client.lrange(keys.lifo, 0, limit === undefined ? -1 : limit - 1);
  if (limit !== undefined && ids.length >= limit) return ids;
  ids.push(...(await undeliveredIds(client, keys, limit === undefined ? undefined : limit - ids.length)));
  if (limit !== undefined && ids.length >= limit) return ids;
  const groups = await waitingGroupJobIds(client, keys);
  ids.push(...(limit === undefined ? groups : groups.slice(0, limit - ids.length)));
  return ids;
}

/** Job ids of the stream entries no worker has been given yet (after the group's last delivery). */
async function undeliveredIds(client: Client, keys: QueueKeys, count?: number): Promise<string[]> {
  let last = '0-0';
  try {
    const groups = (await client.xinfo('GROUPS', keys.stream)) as unknown[][];
    for (const g of groups) {
      const h = pairsToRecord(g);
      if (h.name === CONSUMER_GROUP) last = String(h['last-delivered-id']);
    }
  } catch {
    return []; // no stream yet
  }
  const entries = (
    count === undefined ? await client.xrange(keys.stream, `(${last}`, '+') : await client.xrange(keys.stream, `(${last}`, '+', 'COUNT', count)
  ) as [string, string[]][];
  return entries.map((e) => e[1][1]);
}

/**
 * The ids of the active jobs, the one active longest first: the jobs of the stream entries
 * delivered and not yet acknowledged, and the claimed priority/LIFO/group jobs. Ordered by the
 * server's processedOn of each claim (active jobs are at most the workers' concurrency).
 */
async function activeIds(client: Client, keys: QueueKeys): Promise<string[]> {
  const [listIds, pending] = await Promise.all([
    client.smembers(keys.listActiveIds),
    client.xpending(keys.stream, CONSUMER_GROUP, '-', '+', 10000).catch(() => [] as unknown[]) as Promise<[string][]>,
  ]);
  const entries = await Promise.all(pending.map((p) => client.xrange(keys.stream, p[0], p[0]) as Promise<[string, string[]][]>));
  const ids = [...new Set([...entries.flatMap((e) => (e[0] ? [e[0][1][1]] : [])), ...listIds])];
  const since = await Promise.all(ids.map((id) => client.hget(keys.job(id), 'processedOn')));
  const at = new Map(ids.map((id, i) => [id, Number(since[i] ?? 0) || 0]));
  return ids.sort((a, b) => at.get(a)! - at.get(b)! || compareIds(a, b));
}

/** Numeric ids by value, others by text: a stable order for claims made in the same ms. */
function compareIds(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  return Number.isSafeInteger(na) && Number.isSafeInteger(nb) ? na - nb : a.localeCompare(b);
}

/** The key of a type kept in a sorted set, or undefined. */
function sortedSetOf(type: JobType, keys: QueueKeys): string | undefined {
  switch (type) {
    case 'completed':
      return keys.completed;
    case 'failed':
      return keys.failed;
    case 'delayed':
      return keys.scheduled;
    case 'prioritized':
      return keys.prioritized;
    default:
      return undefined;
  }
}

/**
 * One type's page of ids. `asc` true: oldest (next to run, first activated, first finished) first;
 * false: newest first. The page is `start`..`end` of the type's jobs in that order, as BullMQ's.
 */
async function pageOf(t: QueryTarget, type: JobType, start: number, end: number, asc: boolean): Promise<string[]> {
  const { client, keys } = t;
  const zset = sortedSetOf(type, keys);
  if (zset) return asc ? client.zrange(zset, String(start), String(end)) : client.zrevrange(zset, start, end);
  switch (type) {
    case 'waiting':
    case 'wait':
    case 'paused': {
      // 'paused': a paused queue's waiting jobs, none while it runs
      if (type === 'paused' && (await client.hget(keys.meta, 'paused')) !== '1') return [];
      // from the front, only what the page needs is read
      const limit = asc && start >= 0 && end >= 0 ? end + 1 : undefined;
      const line = await waitingLine(client, keys, limit);
      return slice(asc ? line : line.reverse(), start, end);
    }
    case 'active': {
      const ids = await activeIds(client, keys);
      return slice(asc ? ids : ids.reverse(), start, end);
    }
    default:
      return []; // 'waiting-children' (no flows) and 'repeat' (schedulers are not jobs)
  }
}

/** The state a job listed under `type` is in (a listed id whose job moved on since is left out). */
function stateOfType(type: JobType): JobState | undefined {
  if (type === 'wait' || type === 'paused') return 'waiting';
  return STATES.includes(type) ? (type as JobState) : undefined;
}

/**
 * getJobs: each type's page in the order of `types`, each job once. A job that moved to another
 * state (or was removed) between reading the ids and reading the job is left out.
 */
export async function listJobs(
  t: QueryTarget & { getJob(id: string): Promise<Job | undefined> },
  types: JobType[],
  start: number,
  end: number,
  asc: boolean,
): Promise<Job[]> {
  const pages = await Promise.all(types.map((type) => pageOf(t, type, start, end, asc)));
  const wanted = new Map<string, JobState | undefined>();
  pages.forEach((ids, i) => {
    for (const id of ids) if (!wanted.has(id)) wanted.set(id, stateOfType(types[i]));
  });
  const jobs = await Promise.all([...wanted.keys()].map((id) => t.getJob(id)));
  return jobs.filter((j): j is Job => !!j && j.state === wanted.get(j.id));
}
