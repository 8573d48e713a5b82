/**
 * Job options: validation with messages that name the option, encoding into the argument group
 * glidemq_add takes, and the backoff arithmetic used when an attempt fails.
 */
import { invalid } from './errors.js';
import { parseDuration } from './duration.js';
import { encodeGroup, type GroupOptions } from './groups.js';

export const MAX_PRIORITY = 2097152;
/** The longest job id, in bytes (lua/args.lua MAX_ID_LEN: the library counts bytes). */
export const MAX_JOB_ID_BYTES = 256;
export const DEFAULT_MAX_PAYLOAD = 512 * 1024;
/** The longest job name, in bytes (lua/jobs.lua MAX_JOB_NAME_LEN: the library counts bytes). */
export const MAX_JOB_NAME_BYTES = 1024;
/** The longest dedup window, in ms: 10 years of 365.25 days (lua/dedup.lua DEDUP_MAX_TTL). */
export const MAX_DEDUP_TTL_MS = 315576000000;

export type Retention = boolean | number | { count?: number; age?: number };

export interface BackoffOptions {
  type: 'fixed' | 'exponential';
  /** Base delay in ms. */
  delay: number;
  /** 0..1: each delay is reduced by up to this fraction at random, so retries spread out. */
  jitter?: number;
}

export interface JobOptions {
  /** Custom id: adding a job whose id exists adds nothing and returns the existing job. Not a whole
   * number such as '2' (those are the ids the queue hands out): use e.g. 'order-2'. */
  jobId?: string;
  delay?: number | string;
  /** 1 is served first, up to 2097152. */
  priority?: number;
  lifo?: boolean;
  attempts?: number;
  backoff?: number | BackoffOptions | string;
  removeOnComplete?: Retention;
  removeOnFail?: Retention;
  /** job.log keeps the newest this many lines of the job's log (default: every line). */
  keepLogs?: number;
  /** Deduplication by id (see DedupOptions). */
  dedup?: DedupOptions;
  /** Run under a group's limits and order (see groups.ts). Not with priority or lifo. */
  group?: GroupOptions;
}

export type DedupMode = 'simple' | 'throttle' | 'debounce';

export interface DedupOptions {
  id: string;
  /** Window in ms (or a duration text). simple: caps how long an unfinished job blocks;
   * throttle: required; debounce: the quiet period (default: the delay). */
  ttl?: number | string;
  /** simple: blocked while the earlier job is unfinished; throttle: blocked for ttl after the first
   * add; debounce: replaces the data and restarts the delay of the earlier job while it is delayed.
   * Default: throttle when a ttl is given, else simple. */
  mode?: DedupMode;
}

const DEDUP_MODES: DedupMode[] = ['simple', 'throttle', 'debounce'];

/** Validates dedup options; returns the three glidemq_add fields (id, ttl ms, mode). */
export function encodeDedup(d: DedupOptions | undefined, delay: number): [string, number, string] {
  if (d === undefined) return ['', 0, ''];
  if (typeof d !== 'object' || d === null) throw invalid('dedup must be an object {id, ttl?, mode?}');
  if (typeof d.id !== 'string' || d.id.length === 0 || Buffer.byteLength(d.id) > 512) {
    throw invalid('dedup.id must be a non-empty string of at most 512 bytes');
  }
  const ttl = d.ttl === undefined ? 0 : checkDelay(d.ttl, 'dedup.ttl');
  if (ttl > MAX_DEDUP_TTL_MS) {
    throw invalid(`dedup.ttl is ${ttl} ms, over the limit of ${MAX_DEDUP_TTL_MS} ms (10 years); for a window that never ends, leave ttl out (mode simple)`);
  }
  const mode = d.mode ?? (ttl > 0 ? 'throttle' : 'simple');
  if (!DEDUP_MODES.includes(mode)) throw invalid(`dedup.mode must be simple, throttle or debounce, got "${String(mode)}"`);
  if (mode === 'throttle' && ttl === 0) throw invalid('dedup mode throttle needs a ttl > 0');
  if (mode === 'debounce' && delay <= 0) throw invalid('dedup mode debounce needs a delay > 0 (the job waits out the quiet period)');
  return [d.id, ttl, mode];
}

/** What is stored in the job hash's `opts` field (only what Lua does not need to read). */
export interface StoredOptions {
  backoff?: BackoffOptions;
  removeOnComplete?: Retention;
  removeOnFail?: Retention;
  keepLogs?: number;
}

export function parseBackoff(value: JobOptions['backoff']): BackoffOptions | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return { type: 'fixed', delay: checkDelay(value, 'backoff') };
  if (typeof value === 'string') {
    const m = /^(fixed|exponential):(.+)$/.exec(value);
    if (!m) throw invalid(`backoff "${value}" is not <fixed|exponential>:<ms>`);
    return { type: m[1] as BackoffOptions['type'], delay: parseDuration(m[2], 'backoff delay') };
  }
  if (value.type !== 'fixed' && value.type !== 'exponential') {
    throw invalid(`backoff type must be "fixed" or "exponential", got "${String(value.type)}"`);
  }
  const jitter = value.jitter ?? 0;
  if (!(jitter >= 0 && jitter <= 1)) throw invalid(`backoff jitter must be between 0 and 1, got ${jitter}`);
  return { type: value.type, delay: checkDelay(value.delay, 'backoff delay'), ...(jitter ? { jitter } : {}) };
}

function checkDelay(v: unknown, what: string): number {
  if (typeof v === 'string') return parseDuration(v, what);
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw invalid(`${what} must be a number of ms >= 0`);
  return Math.floor(v);
}

export function checkRetention(v: Retention | undefined, what: string): Retention | undefined {
  if (v === undefined || typeof v === 'boolean') return v;
  if (typeof v === 'number') {
    if (!Number.isInteger(v) || v < 0) throw invalid(`${what} must be true, false, a count >= 0 or {count, age}`);
    return v;
  }
  if (typeof v === 'object' && v !== null) {
    if (v.count !== undefined && (!Number.isInteger(v.count) || v.count < 0)) throw invalid(`${what}.count must be a whole number >= 0`);
    if (v.age !== undefined && (!Number.isFinite(v.age) || v.age < 0)) throw invalid(`${what}.age must be a number of ms >= 0`);
    return v;
  }
  throw invalid(`${what} must be true, false, a count or {count, age}`);
}

/** Encodes a retention rule for glidemq_finish: '' keep, '0' remove now, 'count:N', 'age:MS'. */
export function encodeRetention(v: Retention | undefined): string {
  if (v === undefined || v === false) return '';
  if (v === true) return '0';
  if (typeof v === 'number') return v === 0 ? '0' : `count:${v}`;
  if (v.count !== undefined) return v.count === 0 ? '0' : `count:${v.count}`;
  if (v.age !== undefined) return `age:${Math.floor(v.age)}`;
  return '';
}

export interface EncodedJob {
  args: (string | number)[];
}

/** Validates one job and returns its 12-field argument group for glidemq_add. */
export function encodeJob(name: string, data: unknown, opts: JobOptions = {}): (string | number)[] {
  if (typeof name !== 'string' || name.length === 0) throw invalid('job name must be a non-empty string');
  const nameBytes = Buffer.byteLength(name);
  if (nameBytes > MAX_JOB_NAME_BYTES) {
    throw invalid(`job name "${name.slice(0, 40)}..." is ${nameBytes} bytes, over the limit of ${MAX_JOB_NAME_BYTES} bytes; use a short name and put the rest in the job's data`);
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(data === undefined ? {} : data);
  } catch (err) {
    throw invalid(`job data cannot be serialised to JSON: ${(err as Error).message}`);
  }
  if (json === undefined) throw invalid('job data cannot be serialised to JSON');
  const delay = opts.delay === undefined ? 0 : checkDelay(opts.delay, 'delay');
  const priority = opts.priority ?? 0;
  if (opts.priority !== undefined && (!Number.isInteger(priority) || priority < 1 || priority > MAX_PRIORITY)) {
    throw invalid(`priority must be a whole number from 1 to ${MAX_PRIORITY}, got ${String(opts.priority)}`);
  }
  const attempts = opts.attempts ?? 1;
  if (!Number.isInteger(attempts) || attempts < 1) throw invalid(`attempts must be a whole number >= 1, got ${String(opts.attempts)}`);
  const jobId = opts.jobId ?? '';
  if (opts.jobId !== undefined && jobId === '') throw invalid('job id is empty: leave it out to get the next id');
  if (typeof jobId !== 'string' || Buffer.byteLength(jobId) > MAX_JOB_ID_BYTES || /[:\s{}\p{Cc}]/u.test(jobId)) {
    throw invalid(`job id "${String(jobId)}" is invalid: at most ${MAX_JOB_ID_BYTES} bytes, no ":", "{", "}", whitespace or control characters`);
  }
  if (/^-?\d+$/.test(jobId)) {
    throw invalid(`job id "${jobId}" is invalid: custom ids cannot be whole numbers (those are the ids the queue hands out, so "${jobId}" could name another job); use e.g. "order-${jobId}"`);
  }
  if (opts.priority !== undefined && opts.lifo) throw invalid('a job cannot be both prioritized and LIFO');
  const group = encodeGroup(opts.group);
  if (group && (opts.priority !== undefined || opts.lifo)) {
    throw invalid("a group job runs in its group's order: it cannot be prioritized or LIFO");
  }
  const stored: StoredOptions = {};
  const backoff = parseBackoff(opts.backoff);
  if (backoff) stored.backoff = backoff;
  const roc = checkRetention(opts.removeOnComplete, 'removeOnComplete');
  const rof = checkRetention(opts.removeOnFail, 'removeOnFail');
  // an explicit false is kept: it overrides a Worker-level rule
  if (roc !== undefined) stored.removeOnComplete = roc;
  if (rof !== undefined) stored.removeOnFail = rof;
  if (opts.keepLogs !== undefined) {
    if (!Number.isInteger(opts.keepLogs) || opts.keepLogs < 0) {
      throw invalid(`keepLogs must be a whole number >= 0 (0 or none: keep every line), got ${String(opts.keepLogs)}`);
    }
    if (opts.keepLogs > 0) stored.keepLogs = opts.keepLogs;
  }
  const storedJson = Object.keys(stored).length ? JSON.stringify(stored) : '';
  return [jobId, name, json, delay, priority, opts.lifo ? '1' : '0', attempts, storedJson, ...encodeDedup(opts.dedup, delay), group];
}

/** The delay before the next attempt, given how many attempts have been made so far. */
export function backoffDelay(backoff: BackoffOptions | undefined, attemptsMade: number, random = Math.random): number {
  if (!backoff) return 0;
  const base = backoff.type === 'exponential' ? backoff.delay * 2 ** Math.max(0, attemptsMade - 1) : backoff.delay;
  const jitter = backoff.jitter ?? 0;
  return Math.max(0, Math.round(base * (1 - jitter * random())));
}

export interface BulkJob {
  name: string;
  data: unknown;
  opts?: JobOptions;
}

/**
 * Validates and encodes every job of a bulk before anything is written. An error names the job by
 * its 1-based position (`index` on the error), so callers can map it to a line of their input.
 */
export function encodeBulk(jobs: BulkJob[], maxPayload: number): (string | number)[][] {
  return jobs.map((j, i) => {
    try {
      const group = encodeJob(j.name, j.data, j.opts);
      const size = Buffer.byteLength(String(group[2]));
      if (maxPayload > 0 && size > maxPayload) {
        throw invalid(`payload is ${size} bytes, over the limit of ${maxPayload} bytes; store large data elsewhere and enqueue a reference`);
      }
      return group;
    } catch (err) {
      const e = invalid(`job ${i + 1}: ${(err as Error).message}`) as Error & { index?: number; reason?: string };
      e.index = i + 1;
      e.reason = (err as Error).message;
      throw e;
    }
  });
}
