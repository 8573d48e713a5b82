/**
 * Removing a job (queue.remove, job.remove): one glidemq_removeJob call (lua/remove.lua). A parent
 * goes with its unfinished subtree, or with `removeChildren: false` alone, its children unlinked.
 * On a standalone server (and a Sentinel's primary) that one call reaches every queue. On a
 * cluster a child in another queue is in another slot: first this side walks the subtree across
 * slots (reads only) and refuses, as the call refuses in its own slot, while one of its jobs is
 * being processed; then the call removes what is in its slot and writes an outbox record per
 * child in another slot, which this side relays at once (glidemq_parentRemoved in the child's
 * queue, on down the subtree); upkeep and `glidemq heal` relay what a crash left, so nothing is
 * left that may run for a removed parent. A child claimed between the walk and the relay is
 * removed from under its worker (whose finish then changes nothing), as force would.
 */
import { isCluster, type Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import { JobActiveError } from '../shared/errors.js';
import type { QueueKeys } from '../shared/keys.js';
import { relayOutbox, splitJobKey } from '../producing/flow-outbox.js';

export interface RemoveJobOptions {
  /** Also remove a running job (its claim is released); default false (JobActiveError). */
  force?: boolean;
  /** A parent's unfinished subtree goes too (BullMQ's default); false: its children stay, no longer naming it. */
  removeChildren?: boolean;
}

/** Jobs of a subtree read per round of the walk across slots (their reads pipelined). */
const WALK_BATCH = 100;

/**
 * Walks the subtree of `jobKey` across queues (a cluster: every read routed by its key): whether
 * it has a child in another queue than `base`, and refuses when a job of the subtree in another
 * queue is being processed (the call checks its own queue's). Without `removeChildren` only the
 * direct children are looked at, and none is refused.
 */
async function childrenElsewhere(client: Client, base: string, jobKey: string, id: string, opts: RemoveJobOptions): Promise<boolean> {
  let elsewhere = false;
  const seen = new Set<string>([jobKey]);
  let level = [jobKey];
  while (level.length > 0) {
    const next: string[] = [];
    for (let i = 0; i < level.length; i += WALK_BATCH) {
      const part = level.slice(i, i + WALK_BATCH);
      const childLists = await Promise.all(part.map((key) => client.smembers(`${key}:deps`)));
      for (const children of childLists) {
        for (const child of children) {
          if (seen.has(child)) continue;
          seen.add(child);
          next.push(child);
        }
      }
    }
    const states = await Promise.all(next.map((key) => client.hget(key, 'state')));
    next.forEach((key, i) => {
      const away = splitJobKey(key)?.metaKey !== `${base}:meta`;
      if (!away) return;
      elsewhere = true;
      if (opts.removeChildren !== false && states[i] === 'active' && !opts.force) {
        throw new JobActiveError('ERR_JOB_ACTIVE', `job ${id}: its child ${key} is being processed; wait for it to finish or remove the job with force`);
      }
    });
    if (opts.removeChildren === false) break;
    level = next;
  }
  return elsewhere;
}

/** Removes job `id` of the queue of `keys` (see above). True when it was removed, false when there was no such job. */
export async function removeJob(client: Client, keys: QueueKeys, id: string, opts: RemoveJobOptions = {}): Promise<boolean> {
  const cluster = isCluster(client);
  const elsewhere = cluster && (await childrenElsewhere(client, keys.base, keys.job(id), id, opts));
  const args = [id, opts.force ? '1' : '0', opts.removeChildren === false ? '0' : '1'];
  const removed = (await callFunction(client, 'glidemq_removeJob', keys.meta, args)) === 1;
  // the records owed to the children in other slots, relayed now (upkeep relays them after a crash)
  if (removed && elsewhere) await relayOutbox(client, keys.meta, 0);
  return removed;
}
