/**
 * Destructive queue operations: drain (waiting jobs), clean (finished jobs past a grace period)
 * and obliterate (every key of the queue). Each can count instead of removing (dry run).
 */
import { connectionFor, type Client } from './connection.js';
import { globEscape } from './discovery.js';
import { JobActiveError } from './errors.js';
import { groupsWithLines } from './groups.js';
import type { QueueKeys } from './keys.js';
import { callFunction } from './library.js';

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
 * Removes completed or failed jobs that finished more than `graceMs` ago (at most `limit`). The age
 * is measured on the server (its TIME against the finish times it wrote), never by this clock.
 */
export async function clean(
  client: Client,
  keys: QueueKeys,
  state: 'completed' | 'failed',
  graceMs: number,
  opts: { limit?: number; dryRun?: boolean } = {},
): Promise<CleanResult> {
  const limit = opts.limit ?? Number.MAX_SAFE_INTEGER;
  const ids: string[] = [];
  while (ids.length < limit) {
    const want = Math.min(BATCH, limit - ids.length);
    const batch = (await callFunction(client, 'glidemq_clean', keys.meta, [state, graceMs, want, opts.dryRun ? '1' : '0'])) as string[];
    ids.push(...batch);
    if (batch.length < want || opts.dryRun) break;
  }
  return { ids, dryRun: !!opts.dryRun };
}

export interface ObliterateResult {
  keys: number;
  /** Jobs active when it ran (a dry run reports them instead of refusing). */
  active: number;
  dryRun: boolean;
}

/**
 * Deletes every key of the queue. The queue is paused first so no worker takes a job meanwhile;
 * a queue with active jobs is refused unless `force`.
 */
export async function obliterate(
  client: Client,
  keys: QueueKeys,
  opts: { force?: boolean; dryRun?: boolean } = {},
): Promise<ObliterateResult> {
  const counts = (await callFunction(client, 'glidemq_getCounts', keys.meta, [])) as number[];
  if (counts[1] > 0 && !opts.force && !opts.dryRun) {
    throw new JobActiveError(
      'ERR_JOB_ACTIVE',
      `queue ${keys.queue} has ${counts[1]} active job${counts[1] === 1 ? '' : 's'}; stop its workers first, or pass force to obliterate anyway`,
      true,
    );
  }
  if (!opts.dryRun) await callFunction(client, 'glidemq_pause', keys.meta, []);
  const node = connectionFor(client, keys.meta);
  if (!node) throw new Error(`no primary is known yet for queue ${keys.queue}; try again once the cluster is reachable`);
  let cursor = '0';
  let total = 0;
  do {
    const [next, found] = await node.scan(cursor, 'MATCH', `${globEscape(keys.base)}:*`, 'COUNT', BATCH);
    cursor = next;
    total += found.length;
    if (found.length && !opts.dryRun) await node.unlink(...found);
  } while (cursor !== '0');
  return { keys: total, active: counts[1], dryRun: !!opts.dryRun };
}
