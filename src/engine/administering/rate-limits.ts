/**
 * BullMQ's queue-level rate limit calls over glidemq's limiter (lua/rate-window.lua): the limiter
 * set on the queue itself (setGlobalRateLimit: the meta fields rateMax/rateDuration every claim
 * path reads), a hold of the whole queue (worker.rateLimit) and how long the queue stays limited
 * (getRateLimitTtl), judged on the server's TIME.
 */
import type { Client } from '../connecting/connection.js';
import { invalid } from '../shared/errors.js';
import { callFunction } from '../connecting/library.js';
import type { QueueKeys } from '../shared/keys.js';

function checkWhole(value: number, what: string, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) throw invalid(`${what} must be a whole number >= ${min}, got ${String(value)}`);
}

/** At most `max` jobs start in any `duration` ms, across every worker of the queue (BullMQ's setGlobalRateLimit). */
export async function setGlobalRateLimit(client: Client, keys: QueueKeys, max: number, duration: number): Promise<void> {
  checkWhole(max, 'setGlobalRateLimit(max, duration): max', 1);
  checkWhole(duration, 'setGlobalRateLimit(max, duration): duration', 1);
  await client.hset(keys.meta, 'rateMax', String(max), 'rateDuration', String(duration));
}

/**
 * The queue-wide limits a worker's options name, stored at its start: globalConcurrency, and the
 * limiter, which is queue-wide as BullMQ's (every worker's claims count against it).
 */
export async function storeWorkerLimits(client: Client, keys: QueueKeys, globalConcurrency: number, limiter?: { max: number; duration: number }): Promise<void> {
  if (globalConcurrency > 0) await client.hset(keys.meta, 'globalConcurrency', String(globalConcurrency));
  if (limiter) await client.hset(keys.meta, 'rateMax', String(limiter.max), 'rateDuration', String(limiter.duration));
}

/**
 * Holds the whole queue: no worker of it starts a job for `ms` from the server's now (BullMQ's
 * worker.rateLimit, glidemq_rateLimit). A hold never shortens one already in place.
 */
export async function holdQueue(client: Client, keys: QueueKeys, ms: number): Promise<void> {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw invalid(`worker.rateLimit(ms): ms must be a number of ms >= 0, got ${String(ms)}`);
  }
  const whole = Math.min(Math.ceil(ms), Number.MAX_SAFE_INTEGER);
  await callFunction(client, 'glidemq_rateLimit', keys.meta, [whole]);
}

/** Ends the queue's limiter (a worker started with a `limiter` option sets it again). */
export async function removeGlobalRateLimit(client: Client, keys: QueueKeys): Promise<void> {
  await client.hdel(keys.meta, 'rateMax', 'rateDuration');
}

/**
 * BullMQ's getRateLimitTtl: with `maxJobs`, the ms until a job may start if `maxJobs` starts (or a
 * hold, worker.rateLimit) fill the window now, else 0; without, the ms the current window lasts, or
 * -2 when no window is open (BullMQ's PTTL of a missing key). One MULTI reads TIME, the limiter and
 * the log, so the answer is the server's at one instant.
 */
export async function rateLimitTtl(client: Client, keys: QueueKeys, maxJobs?: number): Promise<number> {
  if (maxJobs !== undefined) checkWhole(maxJobs, 'getRateLimitTtl(maxJobs): maxJobs', 0);
  if (maxJobs === 0) maxJobs = undefined; // BullMQ's 0: not given
  const r = await client.multi().time().hmget(keys.meta, 'rateMax', 'rateDuration', 'rateHoldUntil').zrange(keys.rateLog, '0', '-1', 'WITHSCORES').exec();
  const [s, us] = (r?.[0]?.[1] as [string, string]) ?? ['0', '0'];
  const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
  const [maxField, durationField, holdField] = (r?.[1]?.[1] as (string | null)[]) ?? [];
  const holdUntil = Number(holdField ?? 0);
  if (holdUntil > now) return holdUntil - now;
  const duration = Number(durationField ?? 0);
  const flat = (r?.[2]?.[1] as string[]) ?? [];
  // the starts still inside the window, oldest first
  const starts: number[] = [];
  for (let i = 1; i < flat.length; i += 2) if (Number(flat[i]) > now - duration) starts.push(Number(flat[i]));
  if (duration <= 0 || starts.length === 0) return maxJobs === undefined ? -2 : 0;
  const max = maxJobs ?? Number(maxField ?? 0);
  if (maxJobs !== undefined && starts.length < max) return 0;
  // full (or no maxJobs asked): until the start that makes it full leaves the window
  const pivot = max > 0 && starts.length >= max ? starts[starts.length - max] : starts[0];
  return Math.max(1, Math.min(duration, pivot + duration - now));
}
