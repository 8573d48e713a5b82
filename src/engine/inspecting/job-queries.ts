/**
 * Job states and counts as BullMQ applications ask for them (issue 18): a job's state, counts per
 * type (getJobCounts(...types), getJobCountByTypes, count()) and jobs per type in pages
 * (getJobs(types, start, end, asc)). The Queue and Job methods of these names delegate here.
 *
 * The state is the job hash's `state` field: every Lua function that moves a job writes it in
 * the same call, so one HGET answers. Counts come from glidemq_getCounts (lua/query.lua): one
 * read-only call of a few O(1) commands, whatever the queue holds. Listings come from
 * glidemq_listJobs (the same file): the ids of every state asked for, read in one call and
 * classified as the counts count them, so no job is left out or listed twice while it moves.
 *
 * Paused queues: a waiting job of a paused queue counts under `paused`, not under `waiting` too
 * (getJobCounts). Where BullMQ's "waiting" means every job that waits (getWaitingCount,
 * getJobCountByTypes('waiting'), count(), getJobs('waiting'), job.isWaiting(), getJobState) it
 * includes them, as BullMQ's does: BullMQ 5 adds its paused list to 'waiting', and 6.7 keeps a
 * paused queue's jobs in its wait list.
 */
import type { Client } from '../connecting/connection.js';
import { invalid } from '../shared/errors.js';
import { groupsWithLines } from '../producing/groups.js';
import { callFunction } from '../connecting/library.js';
import { CONSUMER_GROUP, type QueueKeys } from '../shared/keys.js';
import { pairsToRecord } from '../shared/replies.js';

/** BullMQ's job types: its states, 'wait' (the same as 'waiting'), 'paused' and 'repeat'. */
export type JobType = 'completed' | 'failed' | 'delayed' | 'active' | 'waiting' | 'wait' | 'paused' | 'prioritized' | 'waiting-children' | 'repeat';

/** A job's stored state as BullMQ names it ('unknown': no such job, or a state BullMQ has no name for). */
export type JobState = 'waiting' | 'active' | 'delayed' | 'prioritized' | 'completed' | 'failed' | 'waiting-children' | 'unknown';

/** A state as getJobState and job.getState answer (BullMQ's JobState and 'unknown'). */
export type JobStateName = JobState | 'waiting-children';

const TYPES: readonly string[] = ['completed', 'failed', 'delayed', 'active', 'waiting', 'wait', 'paused', 'prioritized', 'waiting-children', 'repeat'];

/** The types BullMQ counts and lists when none is given. */
const DEFAULT_TYPES: JobType[] = ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting', 'waiting-children'];

/** The states a job hash holds that BullMQ has a name for; any other value is 'unknown'. */
const STATES: readonly string[] = ['completed', 'failed', 'delayed', 'active', 'waiting', 'prioritized', 'waiting-children'];

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
  /** Parents waiting for their children (flows). */
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
  'waiting-children': number;
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
    'waiting-children': r[10] ?? 0,
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
    'waiting-children': raw['waiting-children'],
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
    case 'waiting-children':
      return raw[type];
    case 'repeat':
      return schedulers;
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

/** glidemq_getCounts, unless only types it does not hold are asked for (lua/query.lua). */
async function rawCounts(t: QueryTarget, types: JobType[]): Promise<RawCounts> {
  if (types.length && types.every((type) => type === 'repeat')) {
    return decodeCounts([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  }
  return decodeCounts((await callFunction(t.client, 'glidemq_getCounts', t.keys.meta, [])) as number[]);
}

/** The schedulers ('repeat' in BullMQ's counts), read only when asked for. */
async function schedulerCount(t: QueryTarget, types: JobType[]): Promise<number> {
  return types.includes('repeat') ? t.client.hlen(t.keys.schedulers) : 0;
}

/** The consumers of the job stream's group (0 before the stream exists). */
async function consumerCount(t: QueryTarget): Promise<number> {
  try {
    const groups = (await t.client.xinfo('GROUPS', t.keys.stream)) as unknown[][];
    for (const g of groups) {
      const h = pairsToRecord(g);
      if (h.name === CONSUMER_GROUP) return Number(h.consumers);
    }
  } catch {
    /* no stream yet */
  }
  return 0;
}

/** getJobCounts: every count with no types (allCounts), else exactly the types asked for (countsOf). */
export async function readJobCounts(t: QueryTarget, types: JobType[]): Promise<JobCounts | Record<string, number>> {
  if (types.length === 0) return allCounts(await rawCounts(t, []), await consumerCount(t));
  const asked = checkTypes(types, 'getJobCounts');
  return countsOf(asked, await rawCounts(t, asked), await schedulerCount(t, asked));
}

/** getJobCountByTypes: the jobs in any of `types`, each once (sumOf). */
export async function countJobsOfTypes(t: QueryTarget, types: JobType[]): Promise<number> {
  const asked = checkTypes(types, 'getJobCountByTypes');
  return sumOf(asked, await rawCounts(t, asked), await schedulerCount(t, asked));
}

/** Checks a page's bounds before anything is read. */
export function checkPage(start: unknown, end: unknown, op: string): void {
  for (const [name, v] of [['start', start], ['end', end]] as const) {
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalid(`${op}: ${name} must be a whole number (negative counts from the end), got ${String(v)}`);
  }
}

/** The states glidemq_listJobs lists, by the type asked for ('wait' is 'waiting'); the other types hold no jobs. */
function listedStateOf(type: JobType): string | undefined {
  if (type === 'wait') return 'waiting';
  return type === 'repeat' ? undefined : type;
}

/** Times glidemq_listJobs is asked again when a group got its first waiting job after the SCAN for groups. */
const GROUP_RETRIES = 3;

/**
 * Each type's page of ids, read in one glidemq_listJobs call (lua/query.lua), so a job that moves
 * meanwhile is in one state of the listing, classified as glidemq_getCounts counts it (a prefetched
 * claim, and an entry a blocking read delivered that is not activated yet, are active). The groups
 * with a line are found by SCAN only when waiting group jobs are asked for (meta's groupWaiting).
 */
async function pagesOf(t: QueryTarget, types: JobType[], start: number, end: number, asc: boolean): Promise<string[][]> {
  const states = types.map(listedStateOf);
  const asked = [...new Set(states.filter((s): s is string => s !== undefined))];
  if (!asked.length) return types.map(() => []);
  let groups: string[] = [];
  let reply: unknown[] = [];
  for (let i = 0; i <= GROUP_RETRIES; i++) {
    reply = (await callFunction(t.client, 'glidemq_listJobs', t.keys.meta, [start, end, asc ? '1' : '0', asked.join(','), groups.length, ...groups])) as unknown[];
    if (reply[0] === 1) break;
    groups = await groupsWithLines(t.client, t.keys);
  }
  const byState = new Map(asked.map((s, i) => [s, reply[i + 1] as string[]]));
  return states.map((s) => (s === undefined ? [] : byState.get(s)!));
}

/**
 * getJobs: each type's page in the order of `types`, each job once, as the jobs were at one
 * moment (one read of every state). A job removed before its hash is read is left out; one that
 * moved on since is listed where it was, with what its hash holds now.
 */
export async function listJobs<J>(
  t: QueryTarget & { getJob(id: string): Promise<J | undefined> },
  types: JobType[],
  start: number,
  end: number,
  asc: boolean,
): Promise<J[]> {
  const ids = [...new Set((await pagesOf(t, types, start, end, asc)).flat())];
  const jobs = await Promise.all(ids.map((id) => t.getJob(id)));
  return jobs.filter((j) => j !== undefined) as J[];
}
