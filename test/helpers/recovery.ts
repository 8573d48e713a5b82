/** Conveniences for crash-recovery tests: claims held by a consumer that will never come back, and upkeep objects. */
import { callFunction } from '../../src/engine/connecting/library.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { Maintenance, DEFAULT_MAINTENANCE, type MaintenanceSettings } from '../../src/engine/administering/maintenance.js';
import type { Queue } from '../../src/engine/queue/queue.js';

/**
 * The terms a claim records (lua/activate.lua): the lock and maxStalledCount of the worker it is
 * made for, by which every stalled check judges it. The helpers below claim as a worker whose lock
 * has run out at once (0 ms) unless told otherwise.
 */
export interface ClaimTerms {
  lockDuration?: number;
  maxStalledCount?: number;
}

/** The two claim-terms arguments of the claiming functions. */
export function termsArgs(t: ClaimTerms = {}): [number, number] {
  return [t.lockDuration ?? 0, t.maxStalledCount ?? 1];
}

/** Takes up to `count` jobs as `consumer` through glidemq_fetch, like a worker that then dies. Returns their ids and fences. */
export async function claimAs(q: Queue, consumer: string, count = 1, terms: ClaimTerms = {}): Promise<{ id: string; fence: string }[]> {
  await q.waitUntilReady();
  const r = (await callFunction(q.client, 'glidemq_fetch', q.keys.meta, [consumer, count, ...termsArgs(terms)])) as unknown[];
  return (r.slice(1) as ClaimReply[]).map((reply) => {
    const h = decodeClaim(reply);
    return { id: h.id, fence: h.fence };
  });
}

/**
 * Takes up to `count` jobs as `consumer` the way a worker's prefetch does (the next jobs of a
 * finish that asks for them ahead: marked not started), like a worker that then dies.
 */
export async function claimAheadAs(q: Queue, consumer: string, count = 1, terms: ClaimTerms = {}): Promise<{ id: string; fence: string }[]> {
  await q.waitUntilReady();
  const r = (await callFunction(q.client, 'glidemq_finishMany', q.keys.meta, [consumer, 0, count, '1', '', ...termsArgs(terms)])) as unknown[];
  return (r as ClaimReply[]).map((reply) => {
    const h = decodeClaim(reply);
    return { id: h.id, fence: h.fence };
  });
}

/** Reports, as `consumer`'s next call would, that its processors took these marked claims. */
export async function reportStarted(q: Queue, consumer: string, claims: { id: string; fence: string }[]): Promise<void> {
  await callFunction(q.client, 'glidemq_finishMany', q.keys.meta, [consumer, 0, 0, '0', claims.flatMap((c) => [c.id, c.fence]).join(' '), ...termsArgs()]);
}

/** A finish call as the worker that held the claim would make it (returns the status). */
export async function finishAs(q: Queue, consumer: string, id: string, fence: string, value = '"late"'): Promise<string> {
  const r = (await callFunction(q.client, 'glidemq_finish', q.keys.meta, [id, fence, consumer, 'completed', value, -1, 0, '', 1, '0', ...termsArgs()])) as unknown[];
  return String(r[0]);
}

export function upkeep(q: Queue, settings: Partial<MaintenanceSettings> = {}): Maintenance {
  return new Maintenance(q.client, q.keys, { ...DEFAULT_MAINTENANCE, ...settings });
}

export async function jobHash(q: Queue, id: string): Promise<Record<string, string>> {
  return q.client.hgetall(q.keys.job(id)) as Promise<Record<string, string>>;
}

/** Milliseconds since the pending entries of `consumer` were last delivered (the largest idle). */
export async function pendingIdle(q: Queue): Promise<number> {
  const pend = (await q.client.xpending(q.keys.stream, 'workers', '-', '+', 100)) as [string, string, number, number][];
  return pend.reduce((m, p) => Math.max(m, Number(p[2])), 0);
}

export const STALLED_REASON = 'job stalled more than maxStalledCount';
