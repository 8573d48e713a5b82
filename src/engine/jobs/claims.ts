/**
 * Claims as the server hands them out and renews them: the claim reply of glidemq_fetch / activate /
 * finish decoded, a lock extended by its holder, and the refusal of a token that does not hold the
 * claim. Below job.ts (which builds a Job from a claim), so the parts that claim and finish jobs
 * (the worker, manual fetch, claim recovery) and Job itself share them without importing each other.
 */
import type { Client } from '../connecting/connection.js';
import { invalid, StaleClaimError } from '../shared/errors.js';
import type { QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';
import { pairsToRecord } from '../shared/replies.js';

/** A job's outcome as the application gives it to moveToCompleted / moveToFailed. */
export type ManualOutcome = { completed: true; value: unknown } | { completed: false; error: unknown };

/**
 * Renews a job's claim (`claimed`: its id and the claim's fence, owned by `owner`) for `duration` ms from the server's now, the
 * duration recorded as the claim's lock (glidemq_extendLock). Resolves 1; a StaleClaimError naming
 * `token` when `owner` does not hold the claim. `maxStalledCount`: recorded only for a claim with no terms.
 */
export async function extendClaimLock(
  client: Client, keys: QueueKeys, claimed: { id: string; fence?: string }, owner: string, token: string, duration: number,
  maxStalledCount: number,
): Promise<number> {
  if (typeof duration !== 'number' || !Number.isFinite(duration) || duration < 1) {
    throw invalid(`job ${claimed.id}: extendLock(token, duration): duration must be a number of ms >= 1, got ${String(duration)}`);
  }
  const ms = Math.min(Math.ceil(duration), Number.MAX_SAFE_INTEGER);
  const r = await callFunction(client, 'glidemq_extendLock', keys.meta, [claimed.id, claimed.fence ?? '', owner, ms, maxStalledCount]);
  if (Number(r) !== 1) throw staleTokenError(claimed.id, 'extendLock', token);
  return 1;
}

/** The refusal of a call made with a token that does not hold the job's claim. */
export function staleTokenError(id: string, op: string, token: string): StaleClaimError {
  return new StaleClaimError(
    'ERR_STALE_CLAIM',
    `job ${id}: ${op} with token "${token}" refused: that token does not hold the job's claim (another token fetched it, ` +
      'or its lock ran out and stalled recovery took the job back, or it was finished already): nothing was changed; ' +
      'use the token the job was fetched with, and extend its lock (job.extendLock) before it runs out',
  );
}

/** The refusal of a running job's call whose claim stalled recovery gave to another worker. */
export function claimLostError(id: string): StaleClaimError {
  return new StaleClaimError('ERR_STALE_CLAIM', `job ${id}: this worker no longer holds the job (it stalled and was given to another worker)`);
}

/** The refusal of a manual-processing call (moveToCompleted, moveToFailed) on a job a processor runs. */
export function notManualError(id: string, op: string): Error {
  return invalid(
    `job ${id}: ${op} is for a job fetched with worker.getNextJob(token) (a Worker made without a processor); ` +
      'a processor finishes its job by returning or throwing, and its worker keeps the lock',
  );
}

/** A claim reply as glidemq_fetch/activate/finish return it, one per claimed job. */
export type ClaimReply = (string | null)[];

/**
 * The fields of a claim reply (lua/activate.lua, claimJob): id, fence, name, data, ts and opts by
 * position (null: absent), then the job's other stored fields as name/value pairs.
 */
export function decodeClaim(reply: ClaimReply): Record<string, string> {
  const h = pairsToRecord<string>(reply, 6);
  h.id = reply[0] ?? '';
  h.fence = reply[1] ?? '';
  if (reply[2] != null) h.name = reply[2];
  if (reply[3] != null) h.data = reply[3];
  if (reply[4] != null) h.ts = reply[4];
  if (reply[5] != null) h.opts = reply[5];
  return h;
}
