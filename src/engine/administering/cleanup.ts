/**
 * Destructive queue operations: drain (waiting jobs), clean (jobs of a state past a grace period)
 * and obliterate (every key of the queue). Each can count instead of removing (dry run).
 */
import type { Redis } from 'ioredis';
import { connectionFor, type Client } from '../connecting/connection.js';
import { globEscape } from '../connecting/discovery.js';
import { invalid, JobActiveError } from '../shared/errors.js';
import { groupsWithLines } from '../producing/groups.js';
import type { QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';

/** Jobs per function call: bounded so a huge queue never blocks the server in one call. */
const BATCH = 1000;
/** Group ids named per glidemq_drain call. */
const GROUP_BATCH = 100;

export interface DrainResult {
  removed: number;
  dryRun: boolean;
}

/**
 * Removes the jobs that wait: exactly those getJobCounts counts as waiting and prioritized (stream
 * entries not yet delivered, LIFO, prioritized, and the jobs waiting in groups), and the delayed
 * ones with `delayed`. Active jobs are left to finish, with their group slots. A dry run counts.
 */
export async function drain(client: Client, keys: QueueKeys, opts: { delayed?: boolean; dryRun?: boolean } = {}): Promise<DrainResult> {
  const withDelayed = opts.delayed ? '1' : '0';
  const call = async (dryRun: boolean, groups: string[]) =>
    (await callFunction(client, 'glidemq_drain', keys.meta, [withDelayed, BATCH, dryRun ? '1' : '0', groups.length, ...groups])) as number[];
  if (opts.dryRun) {
    const r = await call(true, []);
    return { removed: r[0], dryRun: true };
  }
  let removed = 0;
  const until = async (groups: string[]) => {
    for (;;) {
      const r = await call(false, groups);
      removed += r[0];
      if (r[1] !== 1 || r[0] === 0) return;
    }
  };
  // the queue's own structures, then the groups' lines: no queue key lists every group that has
  // waiting jobs (a full group is in neither ready- nor timed-groups), so they are found by SCAN
  await until([]);
  const groups = await groupsWithLines(client, keys);
  for (let i = 0; i < groups.length; i += GROUP_BATCH) await until(groups.slice(i, i + GROUP_BATCH));
  return { removed, dryRun: false };
}

export interface CleanResult {
  ids: string[];
  dryRun: boolean;
}

/**
 * The states clean takes, as BullMQ names them: 'wait' and 'waiting' are the same (a paused
 * queue's waiting jobs too: BullMQ 6 keeps them in its wait list); 'paused' is what getJobCounts
 * counts as paused (the waiting jobs of a paused queue, none while it runs).
 */
export type CleanState = 'completed' | 'failed' | 'wait' | 'waiting' | 'paused' | 'prioritized' | 'delayed';
const CLEAN_STATES: readonly string[] = ['completed', 'failed', 'wait', 'waiting', 'paused', 'prioritized', 'delayed'];

/** Checks clean's state, grace and limit (undefined: no limit) before anything is sent. */
export function checkCleanArgs(state: unknown, graceMs: unknown, limit: unknown): CleanState {
  if (state === 'active') {
    throw new JobActiveError(
      'ERR_JOB_ACTIVE',
      "clean cannot remove active jobs: glidemq never removes a running job behind its worker's back; stop the worker, or remove one job with queue.remove(id, { force: true })",
      true,
    );
  }
  if (typeof state !== 'string' || !CLEAN_STATES.includes(state)) {
    throw invalid(`clean: state must be one of ${CLEAN_STATES.join(', ')}, got ${JSON.stringify(state)}`);
  }
  if (typeof graceMs !== 'number' || !Number.isSafeInteger(graceMs) || graceMs < 0) {
    throw invalid(`clean: grace must be a whole number of ms >= 0, got ${String(graceMs)}`);
  }
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1)) {
    throw invalid(`clean: limit must be a whole number >= 1, got ${String(limit)}`);
  }
  return state as CleanState;
}

/**
 * Removes the jobs of `state` older than `graceMs` (at most `limit`). Finished jobs count from
 * when they finished; the others from when they last changed hands (lua/remove.lua
 * glidemq_cleanJobs). The age is measured on the server (its TIME against the times it wrote),
 * never by this clock. Active jobs are never cleaned (checkCleanArgs refuses).
 */
export async function clean(
  client: Client,
  keys: QueueKeys,
  state: CleanState,
  graceMs: number,
  opts: { limit?: number; dryRun?: boolean } = {},
): Promise<CleanResult> {
  checkCleanArgs(state, graceMs, opts.limit);
  if (state !== 'completed' && state !== 'failed') return cleanJobs(client, keys, state, graceMs, opts);
  const limit = opts.limit ?? Number.MAX_SAFE_INTEGER;
  const ids: string[] = [];
  while (ids.length < limit) {
    const want = Math.min(BATCH, limit - ids.length);
    // a dry run removes nothing: it pages on past what it has listed, so it counts what a real
    // run removes (every page of it, up to the limit), not one page
    const offset = opts.dryRun ? ids.length : 0;
    const batch = (await callFunction(client, 'glidemq_clean', keys.meta, [state, graceMs, want, opts.dryRun ? '1' : '0', offset])) as string[];
    ids.push(...batch);
    if (batch.length < want) break;
  }
  return { ids, dryRun: !!opts.dryRun };
}

/**
 * A source of jobs to clean, read a page at a time on the queue's node (reads only). Each page is
 * answered with how many of its jobs were removed, so a source read by position skips none.
 */
type Pages = AsyncGenerator<string[], void, number>;

/** A sorted set in score order, or a list from its tail (oldest first), by position. */
async function* byPosition(node: Redis, key: string, kind: 'zset' | 'list-tail'): Pages {
  let kept = 0; // jobs before the next page that stay
  for (;;) {
    const page =
      kind === 'zset'
        ? await node.zrange(key, String(kept), String(kept + BATCH - 1))
        : (await node.lrange(key, -(kept + BATCH), -(kept + 1))).reverse();
    if (page.length === 0) return;
    const removed = yield page;
    kept += page.length - removed;
    if (page.length < BATCH) return;
  }
}

/** The stream entries no worker has been given yet, after the workers group's last delivery. */
async function* undelivered(node: Redis, keys: QueueKeys): Pages {
  let last = '0-0';
  try {
    for (const g of (await node.xinfo('GROUPS', keys.stream)) as unknown[][]) {
      const name = g[g.indexOf('name') + 1];
      if (name === 'workers') last = String(g[g.indexOf('last-delivered-id') + 1]);
    }
  } catch {
    return; // no stream yet
  }
  for (;;) {
    const entries = (await node.xrange(keys.stream, `(${last}`, '+', 'COUNT', BATCH)) as [string, string[]][];
    if (entries.length === 0) return;
    last = entries[entries.length - 1][0]; // by id: a removed entry moves nothing
    yield entries.map((e) => e[1][1]);
    if (entries.length < BATCH) return;
  }
}

/** The sources that hold the jobs of `state`, in the order BullMQ's clean takes them (oldest first). */
async function* sourcesOf(node: Redis, client: Client, keys: QueueKeys, state: CleanState): AsyncGenerator<Pages> {
  if (state === 'delayed') yield byPosition(node, keys.scheduled, 'zset');
  if (state === 'prioritized') yield byPosition(node, keys.prioritized, 'zset');
  if (state === 'wait' || state === 'waiting' || state === 'paused') {
    yield undelivered(node, keys);
    yield byPosition(node, keys.lifo, 'list-tail');
    // the groups' lines: found by SCAN, as drain finds them (no key lists every group)
    for (const gid of await groupsWithLines(client, keys)) yield byPosition(node, keys.groupJobs(gid), 'zset');
  }
}

/**
 * clean for the states that are not finished: this side lists the jobs of the structures that
 * hold the state, a page at a time; glidemq_cleanJobs decides for each from its hash (its state,
 * its age by the server's clock) and removes it as removeJob does, group bookkeeping included.
 */
async function cleanJobs(
  client: Client,
  keys: QueueKeys,
  state: Exclude<CleanState, 'completed' | 'failed'>,
  graceMs: number,
  opts: { limit?: number; dryRun?: boolean },
): Promise<CleanResult> {
  const limit = opts.limit ?? Number.MAX_SAFE_INTEGER;
  const dryRun = !!opts.dryRun;
  const ids: string[] = [];
  const node = connectionFor(client, keys.meta);
  if (!node) throw new Error(`no primary is known yet for queue ${keys.queue}; try again once the cluster is reachable`);
  // (glidemq_cleanJobs checks the flag itself; this only saves the listing)
  if (state === 'paused' && (await node.hget(keys.meta, 'paused')) !== '1') return { ids, dryRun };
  const luaState = state === 'waiting' ? 'wait' : state;
  for await (const pages of sourcesOf(node, client, keys, state)) {
    let step = await pages.next(0);
    while (!step.done) {
      const page = step.value;
      const want = Math.min(BATCH, limit - ids.length);
      const args = [luaState, graceMs, want, dryRun ? '1' : '0', page.length, ...page];
      const removed = (await callFunction(client, 'glidemq_cleanJobs', keys.meta, args)) as string[];
      ids.push(...removed);
      if (ids.length >= limit) {
        await pages.return();
        return { ids, dryRun };
      }
      step = await pages.next(dryRun ? 0 : removed.length);
    }
  }
  return { ids, dryRun };
}

export interface ObliterateResult {
  keys: number;
  /** Jobs active when it ran (a dry run reports them instead of refusing). */
  active: number;
  dryRun: boolean;
}

export interface ObliterateOptions {
  /** Also while jobs are active (their workers find them gone and store nothing). */
  force?: boolean;
  /** Keys looked at and deleted per round trip (BullMQ's count; default 1000). */
  count?: number;
  /** Count the keys, delete nothing. */
  dryRun?: boolean;
}

function activeRefusal(keys: QueueKeys, active: number): JobActiveError {
  return new JobActiveError(
    'ERR_JOB_ACTIVE',
    `queue ${keys.queue} has ${active} active job${active === 1 ? '' : 's'}; stop its workers first, or pass force to obliterate anyway`,
    true,
  );
}

/**
 * Deletes every key of the queue. The queue is paused first so no worker takes a job meanwhile;
 * a queue with active jobs is refused unless `force`, checked before the pause and again after it
 * (a job a worker took between the two): a refusal after the pause resumes a queue it paused.
 */
export async function obliterate(client: Client, keys: QueueKeys, opts: ObliterateOptions = {}): Promise<ObliterateResult> {
  const count = opts.count ?? BATCH;
  if (!Number.isSafeInteger(count) || count < 1) throw invalid(`obliterate: count must be a whole number >= 1, got ${String(opts.count)}`);
  const activeNow = async () => ((await callFunction(client, 'glidemq_getCounts', keys.meta, [])) as number[])[1];
  let active = await activeNow();
  if (active > 0 && !opts.force && !opts.dryRun) throw activeRefusal(keys, active);
  if (!opts.dryRun) {
    const pausedHere = (await callFunction(client, 'glidemq_pause', keys.meta, [])) === 1;
    active = await activeNow();
    if (active > 0 && !opts.force) {
      if (pausedHere) await callFunction(client, 'glidemq_resume', keys.meta, []);
      throw activeRefusal(keys, active);
    }
  }
  const node = connectionFor(client, keys.meta);
  if (!node) throw new Error(`no primary is known yet for queue ${keys.queue}; try again once the cluster is reachable`);
  let cursor = '0';
  let total = 0;
  do {
    const [next, found] = await node.scan(cursor, 'MATCH', `${globEscape(keys.base)}:*`, 'COUNT', count);
    cursor = next;
    total += found.length;
    for (let i = 0; i < found.length && !opts.dryRun; i += count) await node.unlink(...found.slice(i, i + count));
  } while (cursor !== '0');
  return { keys: total, active, dryRun: !!opts.dryRun };
}
