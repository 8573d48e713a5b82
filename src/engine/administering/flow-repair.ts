/**
 * The repair of lost settlements, by `glidemq heal` and a worker's upkeep. A parent left in
 * waiting-children with no dependency (releaseStuckParents) is queued. And a settlement a failover lost (README "Flows and DAGs", "In a
 * cluster"). A child in another queue settles its parent through an outbox record in its own slot;
 * the relay settles the parent (glidemq_settle in the parent's slot) and then deletes the record.
 * When the parent's primary acknowledged the settle and died before its replica had it, the
 * promoted replica still counts the child among the parent's dependencies while the record is
 * gone: the parent would wait for ever. The child's own hash still says how it ended, so this
 * settles the parent again from it, as the relay would have (glidemq_settle is idempotent: a child
 * no longer among the dependencies changes nothing, so a parent settled already, or a record
 * relayed meanwhile, counts once). A child whose hash was removed (removeOnComplete) cannot be
 * told from one not stored yet and is left. Only a cluster needs this: on one server the record's
 * deletion follows the settle in the one replication stream, so a replica lacking the settle still
 * has the record, which is relayed again.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import type { QueueKeys } from '../shared/keys.js';
import { relayOutbox, splitJobKey } from '../producing/flow-outbox.js';

/** Parents looked at per heal (the oldest waiting first). */
const PARENTS_PER_HEAL = 1000;

/** The settlement kind of a child failed for good, from its stored options (lua/flow-keys.lua FLOW.failureKind), or undefined (the parent keeps waiting). */
function failureKind(opts: string | null): string | undefined {
  if (!opts || !opts.includes('OnFailure')) return undefined;
  try {
    const o = JSON.parse(opts) as Record<string, unknown>;
    if (o.failParentOnFailure === true) return 'fail';
    if (o.ignoreDependencyOnFailure === true) return 'ignore';
    if (o.removeDependencyOnFailure === true) return 'remove';
    if (o.continueParentOnFailure === true) return 'continue';
  } catch {
    /* unreadable options settle nothing */
  }
  return undefined;
}

/**
 * Settles again, from each child's hash, the children in other queues that finished (completed,
 * or failed for good with a failure policy) but still count among the dependencies of a parent of
 * the queue of `keys` that waits for children. `check`: only counts them. Looks at `count`
 * parents from rank `start` of waiting-children (the oldest first), skipping those with more than
 * `maxDeps` unsettled dependencies. Returns how many.
 */
export async function resettleFinishedChildren(client: Client, keys: QueueKeys, check = false, start = 0, count = PARENTS_PER_HEAL, maxDeps = Infinity): Promise<number> {
  const parents = await client.zrange(keys.waitingChildren, String(start), String(start + count - 1));
  let repaired = 0;
  for (const id of parents) {
    // (a worker's upkeep leaves a parent of many children to heal: it reads each child)
    if (maxDeps !== Infinity && (await client.scard(keys.deps(id))) > maxDeps) continue;
    const parentKey = keys.job(id);
    for (const childKey of await client.smembers(keys.deps(id))) {
      const child = splitJobKey(childKey);
      // a child of the parent's own queue settles it in its finish call: nothing to lose between them
      if (!child || child.metaKey === keys.meta) continue;
      const [state, value, reason, opts, parents] = await client.hmget(childKey, 'state', 'returnvalue', 'failedReason', 'opts', 'parents');
      if (!parents || !parents.split(' ').includes(parentKey)) continue;
      const kind = state === 'completed' ? 'completed' : state === 'failed' ? failureKind(opts) : undefined;
      if (!kind) continue;
      if (check) {
        repaired++;
        continue;
      }
      const r = (await callFunction(client, 'glidemq_settle', keys.meta, [1, id, childKey, kind, (kind === 'completed' ? value : reason) ?? ''])) as number[];
      if (Number(r[0]) === 1) repaired++;
      if (Number(r[1]) === 1) await relayOutbox(client, keys.meta, 0);
    }
  }
  return repaired;
}

/** How long (server ms) a parent must have waited before a parent with no dependency left counts as stuck: the call that empties them queues it at once. */
export const STUCK_PARENT_GRACE_MS = 5000;

/**
 * Queues (`check`: only counts) the parents of the queue of `keys` left in waiting-children with
 * no dependency, waiting at least `minAgeMs` (lua/flow.lua glidemq_releaseParents), looking at
 * `count` parents from rank `start`. Returns how many, and the rank to look from next (0: the end).
 */
export async function releaseStuckParents(client: Client, keys: QueueKeys, check = false, start = 0, count = PARENTS_PER_HEAL, minAgeMs = STUCK_PARENT_GRACE_MS): Promise<{ found: number; next: number }> {
  const r = (await callFunction(client, 'glidemq_releaseParents', keys.meta, [check ? '1' : '0', minAgeMs, start, count])) as number[];
  return { found: Number(r[0]), next: Number(r[1]) };
}

/** Every parent of the queue of `keys` left waiting with no dependency, queued (`check`: counted), page by page. */
export async function releaseAllStuckParents(client: Client, keys: QueueKeys, check = false): Promise<number> {
  let found = 0;
  let start = 0;
  for (let calls = 0; calls < 1000; calls++) {
    const r = await releaseStuckParents(client, keys, check, start);
    found += r.found;
    if (r.next === 0) break;
    start = r.next;
  }
  return found;
}
