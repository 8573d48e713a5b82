/**
 * Changing a job from any handle (BullMQ's job.updateData, job.retry, job.promote, queue.retryJobs,
 * ...): the calls behind Job's and Queue's methods, with their arguments checked here so a mistake
 * is named before the server is asked. The Lua is lua/progress.lua (progress, logs, data) and
 * lua/job-edit.lua (retry, promote, delay, priority).
 *
 * Fencing: a write made by the worker that runs the job carries its claim's fence, and changes
 * nothing once that claim is stale; a write from a handle without a claim carries fence '' and may
 * change data, logs and progress of any job that exists, never finish or take it. The functions
 * that move a job (retry, promote, changeDelay) move only jobs no worker holds.
 */
import type { Client } from '../connecting/connection.js';
import { invalid } from '../shared/errors.js';
import type { JobState } from '../inspecting/job-queries.js';
import type { QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';
import { MAX_PRIORITY } from '../producing/options.js';

/** Where a change goes: a queue's client and keys, and the fence of the caller's claim ('' for none). */
export interface EditTarget {
  client: Client;
  keys: QueueKeys;
  fence: string;
}

/** Jobs one retryJobs/promoteJobs call moves at most (lua/args.lua MAX_COUNT). */
const MAX_BATCH = 10000;

function call(t: EditTarget, fn: string, args: (string | number)[]): Promise<unknown> {
  return callFunction(t.client, fn, t.keys.meta, args);
}

/** `value` as JSON text, or an error naming the job, the call and the value. */
function json(id: string, op: string, what: string, value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw invalid(`job ${id}: ${op} needs ${what} that JSON can hold: ${(err as Error).message}`);
  }
  if (text === undefined) throw invalid(`job ${id}: ${op} needs ${what} that JSON can hold, got ${typeof value}`);
  return text;
}

/** A whole number from `min` to `max`, or an error naming the job, the call and the argument. */
function whole(id: string, op: string, name: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw invalid(`${id ? `job ${id}: ` : ''}${op}: ${name} must be a whole number from ${min} to ${max}, got ${String(v)}`);
  }
  return v;
}

export async function updateProgress(t: EditTarget, id: string, progress: unknown): Promise<boolean> {
  return (await call(t, 'glidemq_updateProgress', [id, t.fence, json(id, 'updateProgress', 'a progress', progress)])) === 1;
}

/** Appends a line; keeps the newest `keep` (0: all). Returns the lines kept (0: a stale claim). */
export async function addLog(t: EditTarget, id: string, line: string, keep = 0): Promise<number> {
  if (typeof line !== 'string') throw invalid(`job ${id}: log needs a string line, got ${typeof line}`);
  whole(id, 'log', 'keepLogs', keep, 0);
  return Number(await call(t, 'glidemq_addLog', [id, t.fence, line, keep]));
}

/** Replaces the job's data; refused over `maxBytes` of JSON (0: no limit). False: a stale claim. */
export async function updateData(t: EditTarget, id: string, data: unknown, maxBytes: number): Promise<boolean> {
  return (await call(t, 'glidemq_updateData', [id, t.fence, json(id, 'updateData', 'data', data), maxBytes])) === 1;
}

/** Keeps the newest `keep` lines of the log (0 or none: deletes it). Returns the lines kept. */
export async function clearLogs(t: EditTarget, id: string, keep = 0): Promise<number> {
  whole(id, 'clearLogs', 'keepLogs', keep, 0);
  return Number(await call(t, 'glidemq_clearLogs', [id, t.fence, keep]));
}

export interface RetryOptions {
  /** attemptsMade back to 0 (BullMQ's option; default: kept). */
  resetAttemptsMade?: boolean;
  /** attemptsStarted counts from 0 again (BullMQ's option; default: kept). */
  resetAttemptsStarted?: boolean;
}

function finishedState(id: string, op: string, state: unknown): 'completed' | 'failed' {
  if (state !== 'completed' && state !== 'failed') {
    throw invalid(`${id ? `job ${id}: ` : ''}${op}: state must be 'failed' or 'completed', got ${String(state)}`);
  }
  return state;
}

/** A completed or failed job back to waiting. Returns where it waits. */
export async function retryJob(t: EditTarget, id: string, state: unknown, opts: RetryOptions = {}): Promise<JobState> {
  const s = finishedState(id, 'retry', state);
  const args = [id, s, opts.resetAttemptsMade ? '1' : '0', opts.resetAttemptsStarted ? '1' : '0'];
  return (await call(t, 'glidemq_retryJob', args)) as JobState;
}

export interface RetryJobsOptions {
  /** 'failed' (default) or 'completed'. */
  state?: 'completed' | 'failed';
  /** Jobs moved per server call (default 1000); the calls go on until none is left. */
  count?: number;
  /** Only jobs that finished at or before this time (ms since the epoch; default: the server's now). */
  timestamp?: number;
}

/** Every job of `state` that finished by `timestamp` back to waiting, `count` per call. Returns how many. */
export async function retryJobs(t: EditTarget, opts: RetryJobsOptions = {}): Promise<number> {
  const state = finishedState('', 'retryJobs', opts.state ?? 'failed');
  const count = Math.min(whole('', 'retryJobs', 'count', opts.count ?? 1000, 1), MAX_BATCH);
  let cutoff: string | number = '';
  if (opts.timestamp !== undefined) {
    if (typeof opts.timestamp !== 'number' || !Number.isFinite(opts.timestamp) || opts.timestamp < 0) {
      throw invalid(`retryJobs: timestamp must be a time in ms since the epoch, got ${String(opts.timestamp)}`);
    }
    cutoff = Math.min(Math.floor(opts.timestamp), Number.MAX_SAFE_INTEGER);
  }
  let total = 0;
  for (;;) {
    // the cutoff the first call used (the server's now when none was given) holds for every call
    const [moved, more, used] = (await call(t, 'glidemq_retryJobs', [state, count, cutoff])) as number[];
    total += Number(moved);
    cutoff = Number(used);
    if (Number(more) !== 1) return total;
  }
}

/** A delayed job to waiting now. Returns where it waits. */
export async function promoteJob(t: EditTarget, id: string): Promise<JobState> {
  return (await call(t, 'glidemq_promoteJob', [id])) as JobState;
}

/**
 * Every delayed job to waiting, `count` per call. A job that becomes delayed while this runs (a
 * retry's backoff) may be promoted too, but the calls stop once as many jobs as the delayed set
 * held at the first call have been moved. Returns how many were.
 */
export async function promoteJobs(t: EditTarget, opts: { count?: number } = {}): Promise<number> {
  const count = Math.min(whole('', 'promoteJobs', 'count', opts.count ?? 1000, 1), MAX_BATCH);
  let total = 0;
  let budget = -1;
  let before = Infinity;
  for (;;) {
    const [promoted, left] = ((await call(t, 'glidemq_promoteJobs', [count])) as number[]).map(Number);
    total += promoted;
    if (budget < 0) budget = promoted + left;
    // (a call may move nothing but still drop leftover ids: it made progress while `left` shrinks)
    if (left === 0 || total >= budget || (promoted === 0 && left >= before)) return total;
    before = left;
  }
}

/** A delayed job due `delay` ms from the server's now. */
export async function changeDelay(t: EditTarget, id: string, delay: unknown): Promise<number> {
  if (typeof delay !== 'number' || !Number.isFinite(delay) || delay < 0) {
    throw invalid(`job ${id}: changeDelay needs a delay in ms >= 0, got ${String(delay)}`);
  }
  const ms = Math.min(Math.floor(delay), Number.MAX_SAFE_INTEGER);
  await call(t, 'glidemq_changeDelay', [id, ms]);
  return ms;
}

/** New priority/LIFO options; a job waiting where no worker was given it moves. Returns its state. */
export async function changePriority(t: EditTarget, id: string, opts: { priority?: number; lifo?: boolean }): Promise<JobState> {
  if (opts === null || typeof opts !== 'object') throw invalid(`job ${id}: changePriority needs { priority?, lifo? }`);
  const priority = whole(id, 'changePriority', 'priority', opts.priority ?? 0, 0, MAX_PRIORITY);
  const lifo = !!opts.lifo;
  if (priority > 0 && lifo) throw invalid(`job ${id}: changePriority: a job cannot be both prioritized and LIFO (give a priority, or lifo with priority 0)`);
  return (await call(t, 'glidemq_changePriority', [id, priority, lifo ? '1' : '0'])) as JobState;
}

/**
 * Lines `start`..`end` (inclusive, negative from the end) of a job's log, oldest first when `asc`,
 * newest first otherwise, and how many lines the log holds. Read in one pipeline, not a MULTI: the
 * documented ACL rules for glidemq users allow no MULTI/EXEC (a line added between the two reads
 * only makes the count one ahead).
 */
export async function getJobLogs(
  client: Client,
  keys: QueueKeys,
  id: string,
  start = 0,
  end = -1,
  asc = true,
): Promise<{ logs: string[]; count: number }> {
  whole(id, 'getJobLogs', 'start', start, -Number.MAX_SAFE_INTEGER);
  whole(id, 'getJobLogs', 'end', end, -Number.MAX_SAFE_INTEGER);
  const key = keys.logs(id);
  const reads = client.pipeline();
  if (asc) reads.lrange(key, start, end);
  else reads.lrange(key, -(end + 1), -(start + 1));
  reads.llen(key);
  const r = (await reads.exec()) ?? [];
  for (const [err] of r) if (err) throw err;
  const logs = ((r[0]?.[1] as string[] | undefined) ?? []).slice();
  if (!asc) logs.reverse();
  return { logs, count: Number(r[1]?.[1] ?? 0) };
}
