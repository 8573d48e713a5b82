/**
 * Parents stuck in waiting-children (`glidemq check stuck`): a parent whose dependencies are all
 * settled leaves waiting-children in the same call that settles its last one, so none should ever
 * stay there. A parent that does is what a crash between a child's settlement and the parent's
 * move leaves (a settlement owed to a parent in another queue, in the child's outbox, that no one
 * relayed). The engine should never leave one; this finds it if it did. Read-only.
 *
 * A waiting parent counts as stuck when it has waited at least `olderMs` (the server's clock) and
 * either no dependency is left in its set, or every one left is a child that finished at least
 * `olderMs` ago in a way that settles it: completed, or failed for good under a failure policy
 * (failParentOnFailure, ignoreDependencyOnFailure, removeDependencyOnFailure,
 * continueParentOnFailure), or removed. A child that failed without a policy keeps its parent
 * waiting by design (BullMQ's rule), so such a parent is not stuck.
 *
 * A child's key may be in another queue (another slot in a cluster): each child is read by its own
 * command, never with a multi-key one.
 */
import type { Client } from '../connecting/connection.js';
import { FAILURE_POLICIES } from '../producing/options.js';
import type { QueueKeys } from '../shared/keys.js';

/** What the look needs of a queue (a Queue is one). */
export interface StuckParentsTarget {
  client: Client;
  keys: QueueKeys;
  waitUntilReady(): Promise<void>;
  /** The server's time in ms. */
  serverTime(): Promise<number>;
}

/** A parent in waiting-children whose dependencies are all settled. */
export interface StuckParent {
  jobId: string;
  /** How long it has been in waiting-children, by the server's clock. */
  waitingMs: number;
  /** 'no-deps': its set of unsettled dependencies is empty; 'children-finished': what is left in it are children that finished. */
  reason: 'no-deps' | 'children-finished';
  /** The job keys of the finished children its set still holds. */
  children: string[];
}

export interface StuckParents {
  /** How many of the parents looked at are stuck. */
  count: number;
  /** At most `limit` of them, the longest waiting first. */
  parents: StuckParent[];
  /** Parents in waiting-children (all of them, not only those looked at). */
  waiting: number;
  /** Parents looked at: those waiting at least olderMs, the oldest first, at most 1000. */
  read: number;
  /** Of those, parents with too many unsettled dependencies to look at each (not counted as stuck). */
  unchecked: number;
}

/** Most waiting parents one look reads (the oldest first). */
const PARENTS_READ = 1000;
/** A parent with more unsettled dependencies than this is not looked at child by child. */
export const DEPS_READ = 1000;
/** Parents looked at at once (their reads pipelined on the one connection). */
const PARENTS_AT_ONCE = 50;
/** Parents listed by job (the count is complete up to PARENTS_READ). */
const PARENTS_LISTED = 20;

/** Whether a child's stored options (JSON) carry a failure policy, so its failure for good settles its parents. */
function settlesOnFailure(opts: string | null): boolean {
  if (!opts || !opts.includes('OnFailure')) return false;
  try {
    const o = JSON.parse(opts) as Record<string, unknown>;
    return FAILURE_POLICIES.some((p) => o[p] === true);
  } catch {
    return false;
  }
}

/** Whether the child at `key` finished at least `olderMs` before `now` in a way that settles its parents. */
async function childSettled(queue: StuckParentsTarget, key: string, now: number, olderMs: number): Promise<boolean> {
  const [state, finishedOn, opts] = await queue.client.hmget(key, 'state', 'finishedOn', 'opts');
  if (state === null) return (await queue.client.exists(key)) === 0; // removed: its removal settles it
  const old = finishedOn !== null && Number(finishedOn) <= now - olderMs;
  if (state === 'completed') return old;
  if (state === 'failed') return old && settlesOnFailure(opts);
  return false;
}

/** The stuck parents of `queue` (see above): parents waiting at least `olderMs` whose dependencies are all settled. */
export async function findStuckParents(queue: StuckParentsTarget, olderMs: number, limit = PARENTS_LISTED): Promise<StuckParents> {
  await queue.waitUntilReady();
  const now = await queue.serverTime();
  const k = queue.keys;
  const waiting = await queue.client.zcard(k.waitingChildren);
  const flat = waiting ? await queue.client.zrangebyscore(k.waitingChildren, '-inf', now - olderMs, 'WITHSCORES', 'LIMIT', 0, PARENTS_READ) : [];
  const parents: { jobId: string; waitingMs: number }[] = [];
  for (let i = 0; i < flat.length; i += 2) parents.push({ jobId: flat[i], waitingMs: now - Number(flat[i + 1]) });
  const looks: Look[] = [];
  for (let i = 0; i < parents.length; i += PARENTS_AT_ONCE) {
    looks.push(...(await Promise.all(parents.slice(i, i + PARENTS_AT_ONCE).map((p) => lookAt(queue, p.jobId, p.waitingMs, now, olderMs)))));
  }
  const stuck = looks.filter((l): l is StuckParent => l !== 'waits' && l !== 'unchecked').sort((a, b) => b.waitingMs - a.waitingMs);
  return { count: stuck.length, parents: stuck.slice(0, limit), waiting, read: parents.length, unchecked: looks.filter((l) => l === 'unchecked').length };
}

/** What one look at a waiting parent found: stuck, rightly waiting, or too many dependencies to look at. */
type Look = StuckParent | 'waits' | 'unchecked';

async function lookAt(queue: StuckParentsTarget, jobId: string, waitingMs: number, now: number, olderMs: number): Promise<Look> {
  const deps = queue.keys.deps(jobId);
  const count = await queue.client.scard(deps);
  if (count === 0) return { jobId, waitingMs, reason: 'no-deps', children: [] };
  if (count > DEPS_READ) return 'unchecked';
  const children = await queue.client.smembers(deps);
  const settled = await Promise.all(children.map((c) => childSettled(queue, c, now, olderMs)));
  return settled.every(Boolean) ? { jobId, waitingMs, reason: 'children-finished', children } : 'waits';
}
