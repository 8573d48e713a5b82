/**
 * Revoking a job from any process (queue.revoke, `glidemq cancel`): decided on the server by
 * glidemq_revoke (lua/revoke.lua), so a worker that is offline at the time still obeys when it
 * next renews its locks.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import type { QueueKeys } from '../shared/keys.js';

/**
 * What a revoke did: 'revoked' the job had not started and never will (failed with reason
 * 'revoked', no retry; a revoke repeated answers so too); 'flagged' it runs, and the worker that
 * runs it aborts its signal with reason 'revoked' at its next lock renewal (a failure then fails
 * it for good as 'revoked', a completion stands); 'finished' it completed or failed before, and is
 * left as it is; 'not_found' no such job.
 */
export type RevokeResult = 'revoked' | 'flagged' | 'finished' | 'not_found';

/** Revokes job `id`; with `dryRun`, answers what it would do and changes nothing. */
export async function revokeJob(client: Client, keys: QueueKeys, id: string, dryRun = false): Promise<RevokeResult> {
  return (await callFunction(client, 'glidemq_revoke', keys.meta, [id, dryRun ? '1' : '0'])) as RevokeResult;
}
