/**
 * Job options: validation with messages that name the option, encoding into the argument group
 * glidemq_add takes, and the backoff arithmetic used when an attempt fails.
 */
import type { ConfirmOptions } from './confirm.js';
import { invalid, NotSupportedError } from '../shared/errors.js';
import { checkJobId, checkJobName, checkSizeLimit, dataJson } from './job-checks.js';
import { parseDuration } from '../shared/duration.js';
import { encodeGroup, type GroupOptions } from './groups.js';
import { storedTelemetry, type JobTelemetry } from '../shared/telemetry.js';

export const MAX_PRIORITY = 2097152;
export { DEFAULT_MAX_PAYLOAD, MAX_JOB_ID_BYTES, MAX_JOB_NAME_BYTES } from './job-checks.js';
/** The longest dedup window, in ms: 10 years of 365.25 days (lua/dedup.lua DEDUP_MAX_TTL). */
export const MAX_DEDUP_TTL_MS = 315576000000;

/**
 * What a finished job's set keeps (BullMQ's KeepJobs): true removes the job at once, false (or
 * none) keeps every job, N keeps the newest N, `{ count }` the same, `{ age }` those finished
 * within `age` **seconds**, `{ age, count }` only those that satisfy both.
 */
export type Retention = boolean | number | KeepJobs;

export interface KeepJobs {
  /** Keep at most the newest this many. */
  count?: number;
  /** Keep those finished within this many seconds (BullMQ's unit; fractions allowed). */
  age?: number;
  /** BullMQ's cap on removals per finish: accepted; glidemq removes at most 100 per finish. */
  limit?: number;
}

/** The built-in backoff types; any other name is a custom one, for the worker's backoffStrategy. */
export const BUILTIN_BACKOFFS = ['fixed', 'exponential'] as const;

export interface BackoffOptions {
  /** fixed, exponential, or any other name: then Worker `settings.backoffStrategy` decides. */
  type: 'fixed' | 'exponential' | (string & {});
  /** Base delay in ms (fixed and exponential need it; a custom type may leave it out). */
  delay?: number;
  /** 0..1: each delay is reduced by up to this fraction at random, so retries spread out. */
  jitter?: number;
}

/**
 * BullMQ's deduplication option, mapped onto glidemq's dedup modes (see DedupOptions):
 * `{ id }` simple (blocked while the earlier job is unfinished); `{ id, ttl }` throttle (blocked
 * for ttl ms from the first add); `extend` with a ttl: extend (each blocked add restarts the
 * window); `replace` with a delay: debounce (the earlier job, while it still waits out its delay,
 * takes the new data and its delay restarts).
 */
export interface DeduplicationOptions {
  id: string;
  /** ms. */
  ttl?: number;
  extend?: boolean;
  replace?: boolean;
  /** BullMQ's: refused (NotSupportedError) when true; see fromDeduplication. */
  keepLastIfActive?: boolean;
}

export interface JobOptions {
  /** This add's confirmed write (README "Confirmed writes"), over the Queue's own; false: none. Not stored with the job. */
  confirm?: ConfirmOptions | false;
  /** Custom id: adding a job whose id exists adds nothing and returns the existing job. Not a whole
   * number such as '2' (those are the ids the queue hands out): use e.g. 'order-2'. '' or none:
   * the next id the queue hands out. */
  jobId?: string;
  delay?: number | string;
  /** 1 is served first, up to 2097152; 0 (or none): not prioritized. */
  priority?: number;
  lifo?: boolean;
  attempts?: number;
  backoff?: number | BackoffOptions | string;
  removeOnComplete?: Retention;
  removeOnFail?: Retention;
  /** job.log keeps the newest this many lines of the job's log (default: every line). */
  keepLogs?: number;
  /** Deduplication by id, glidemq's form (see DedupOptions). Not with `deduplication`. */
  dedup?: DedupOptions;
  /** Deduplication by id, BullMQ's form (see DeduplicationOptions). Not with `dedup`. */
  deduplication?: DeduplicationOptions;
  /** BullMQ's deprecated name for `deduplication` ({ id, ttl? }); `deduplication` wins when both are given. */
  debounce?: DeduplicationOptions;
  /** The job's creation time as the application sees it (ms since the epoch; job.timestamp).
   * Shown only: its delay, dedup windows and the age clean uses count from the server's clock. */
  timestamp?: number;
  /** Largest data for this job, in bytes of JSON (BullMQ's sizeLimit); larger data is refused. */
  sizeLimit?: number;
  /** Run under a group's limits and order (see groups.ts). Not with priority or lifo. */
  group?: GroupOptions;
  /**
   * BullMQ's parent of a child job: `id` of the parent job and `queue`, its queue's key
   * (`<prefix>:{<name>}`, or BullMQ's `<prefix>:<name>`). The parent waits for this child.
   */
  parent?: ParentOptions;
  /** A child that fails for good fails its parent (and on up, while each parent says so too). */
  failParentOnFailure?: boolean;
  /** A child that fails for good counts as settled; the parent reads it in getIgnoredChildrenFailures(). */
  ignoreDependencyOnFailure?: boolean;
  /** A child that fails for good is no longer one of its parent's dependencies. */
  removeDependencyOnFailure?: boolean;
  /** A child that fails for good starts its parent at once; the parent reads it in getFailedChildrenValues(). */
  continueParentOnFailure?: boolean;
  /**
   * The longest a run of this job may take, in ms (1 to 2147483647; the Worker's `timeout` when
   * none): then its AbortSignal aborts and the job fails with "timed out after N ms", retried by
   * its attempts and backoff (src/engine/consuming/run-timer.ts).
   */
  timeout?: number;
  /**
   * BullMQ's job telemetry (README "Tracing"): `metadata`, a trace context carrier as JSON, is
   * stored with the job (the traced add fills it in); `omitContext` stores none.
   */
  telemetry?: JobTelemetry;
}

/** A child job's parent (BullMQ's ParentOptions). */
export interface ParentOptions {
  id: string;
  /** The parent's queue key: `<prefix>:{<name>}` (glidemq's) or `<prefix>:<name>` (BullMQ's). */
  queue: string;
}

/** The failure policies of a child job, as BullMQ names them (lua/flow-keys.lua failureKind). */
export const FAILURE_POLICIES = ['failParentOnFailure', 'ignoreDependencyOnFailure', 'removeDependencyOnFailure', 'continueParentOnFailure'] as const;
export type FailurePolicy = (typeof FAILURE_POLICIES)[number];

export type DedupMode = 'simple' | 'throttle' | 'extend' | 'debounce';

export interface DedupOptions {
  id: string;
  /** Window in ms (or a duration text). simple: caps how long an unfinished job blocks;
   * throttle: required; debounce: the quiet period (default: the delay). */
  ttl?: number | string;
  /** simple: blocked while the earlier job is unfinished; throttle: blocked for ttl after the first
   * add; extend: as throttle, and each blocked add restarts the ttl; debounce: replaces the data and
   * restarts the delay of the earlier job while it is delayed.
   * Default: throttle when a ttl is given, else simple. */
  mode?: DedupMode;
}

const DEDUP_MODES: DedupMode[] = ['simple', 'throttle', 'extend', 'debounce'];

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
  if (!DEDUP_MODES.includes(mode)) throw invalid(`dedup.mode must be simple, throttle, extend or debounce, got "${String(mode)}"`);
  if ((mode === 'throttle' || mode === 'extend') && ttl === 0) throw invalid(`dedup mode ${mode} needs a ttl > 0`);
  if (mode === 'debounce' && delay <= 0) throw invalid('dedup mode debounce needs a delay > 0 (the job waits out the quiet period)');
  return [d.id, ttl, mode];
}

/**
 * BullMQ's deduplication of a job: `deduplication`, or else `debounce`, its deprecated alias, which
 * BullMQ refuses without an id (as it does `deduplication`).
 */
export function bullmqDeduplication(opts: Pick<JobOptions, 'deduplication' | 'debounce'>): DeduplicationOptions | undefined {
  if (opts.deduplication !== undefined || opts.debounce === undefined) return opts.deduplication;
  const d = opts.debounce;
  if (typeof d !== 'object' || d === null || typeof d.id !== 'string' || d.id.length === 0) {
    throw invalid('Debounce id must be provided: debounce (BullMQ\'s old name for deduplication) needs { id: a non-empty string, ttl? }');
  }
  return d;
}

/**
 * BullMQ's `deduplication` as the dedup glidemq_add takes (see DeduplicationOptions). `replace`
 * without a delay has no delayed job to replace, and `extend` without a ttl no window to restart:
 * each then means what the other fields say.
 */
export function fromDeduplication(d: DeduplicationOptions | undefined, delay: number): DedupOptions | undefined {
  if (d === undefined) return undefined;
  if (typeof d !== 'object' || d === null) throw invalid('deduplication must be an object {id, ttl?, extend?, replace?}');
  for (const flag of ['extend', 'replace'] as const) {
    if (d[flag] !== undefined && typeof d[flag] !== 'boolean') throw invalid(`deduplication.${flag} must be true or false, got ${String(d[flag])}`);
  }
  if (typeof d.id !== 'string' || d.id.length === 0) throw invalid('deduplication.id must be a non-empty string (the id that marks duplicates)');
  if (d.keepLastIfActive !== undefined && d.keepLastIfActive !== false) {
    // refused by name rather than ignored: an application relying on it would lose the later add
    throw new NotSupportedError('ERR_NOT_SUPPORTED', 'deduplication.keepLastIfActive is not supported: glidemq keeps no next job ' +
      'for an active one. To run one job of an id at a time, give the jobs a group with maxConcurrency 1 (group: { id, maxConcurrency: 1 }); ' +
      'to keep only the latest data while a job waits, use replace with a delay', true);
  }
  const ttl = d.ttl === undefined ? 0 : checkDelay(d.ttl, 'deduplication.ttl');
  const withTtl = ttl > 0 ? { ttl } : {};
  if (d.replace && delay > 0) return { id: d.id, ...withTtl, mode: 'debounce' };
  if (ttl > 0) return { id: d.id, ttl, mode: d.extend ? 'extend' : 'throttle' };
  return { id: d.id, mode: 'simple' };
}

/** What is stored in the job hash's `opts` field (only what Lua does not need to read). */
export interface StoredOptions {
  backoff?: BackoffOptions;
  removeOnComplete?: Retention;
  removeOnFail?: Retention;
  keepLogs?: number;
  /** The application's creation time (job option `timestamp`); job.timestamp shows it. */
  timestamp?: number;
  /** The job's deduplication, BullMQ's form (job.deduplicationId reads its id). */
  deduplication?: DeduplicationOptions;
  /** The job's deduplication, glidemq's form (job.deduplicationId reads its id). */
  dedup?: DedupOptions;
  failParentOnFailure?: boolean;
  ignoreDependencyOnFailure?: boolean;
  removeDependencyOnFailure?: boolean;
  continueParentOnFailure?: boolean;
  /** The run's time limit in ms (read by the worker that runs the job). */
  timeout?: number;
  /** The trace context of the add (and a flow parent's links), read by a traced worker. */
  telemetry?: JobTelemetry;
}

/**
 * The deduplication a job keeps in its stored options, in the form it was given (BullMQ keeps
 * job.opts.deduplication), so that job.deduplicationId reads it on any handle. Call after
 * encodeJob validated `opts`.
 */
export function storedDedup(opts: JobOptions): Pick<StoredOptions, 'dedup' | 'deduplication'> {
  if (opts.dedup !== undefined) {
    const { id, ttl, mode } = opts.dedup;
    return { dedup: { id, ...(ttl !== undefined ? { ttl } : {}), ...(mode !== undefined ? { mode } : {}) } };
  }
  const d = bullmqDeduplication(opts);
  if (d === undefined) return {};
  const { id, ttl, extend, replace } = d;
  const kept: DeduplicationOptions = { id };
  if (ttl !== undefined) kept.ttl = ttl;
  if (extend !== undefined) kept.extend = extend;
  if (replace !== undefined) kept.replace = replace;
  return { deduplication: kept };
}

/**
 * Validates a backoff option. A type other than fixed and exponential is a custom one, accepted
 * only where a strategy can compute it (`custom`: the job options, for the Worker's
 * settings.backoffStrategy; a broadcast worker has none).
 */
export function parseBackoff(value: JobOptions['backoff'], custom = false): BackoffOptions | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return { type: 'fixed', delay: checkDelay(value, 'backoff') };
  if (typeof value === 'string') {
    const m = /^(fixed|exponential):(.+)$/.exec(value);
    if (!m) throw invalid(`backoff "${value}" is not <fixed|exponential>:<ms>`);
    return { type: m[1] as BackoffOptions['type'], delay: parseDuration(m[2], 'backoff delay') };
  }
  if (typeof value !== 'object' || value === null) throw invalid('backoff must be a delay in ms, "<fixed|exponential>:<ms>" or {type, delay?, jitter?}');
  const builtin = (BUILTIN_BACKOFFS as readonly string[]).includes(value.type);
  if (!builtin && !custom) throw invalid(`backoff type must be "fixed" or "exponential", got "${String(value.type)}"`);
  if (!builtin && (typeof value.type !== 'string' || value.type.length === 0)) {
    throw invalid(`backoff type must be "fixed", "exponential" or the name of a custom type (for the Worker's settings.backoffStrategy), got ${String(value.type)}`);
  }
  const jitter = value.jitter ?? 0;
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) throw invalid(`backoff jitter must be a number from 0 to 1, got ${String(jitter)}`);
  const delay = builtin || value.delay !== undefined ? { delay: checkDelay(value.delay, 'backoff delay') } : {};
  return { type: value.type, ...delay, ...(jitter ? { jitter } : {}) };
}

/** Whether the worker's backoffStrategy computes this backoff (a type that is not built in). */
export function isCustomBackoff(backoff: BackoffOptions | undefined): backoff is BackoffOptions {
  return !!backoff && !(BUILTIN_BACKOFFS as readonly string[]).includes(backoff.type);
}

/*
 * Every number an option holds is checked here against the range each later call takes it in
 * (lua/args.lua ARG.ms and intKind, outcomes.lua KEEP_RULE, progress.lua's keep: whole numbers up
 * to 2^53 - 1), so what add accepts, finish, retry, retention and job.log accept too: a value one
 * of them would refuse is refused here, at add, naming the option.
 */
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** A whole number from `min` to 2^53 - 1, or a refusal naming the option (`hint` says what it means). */
function wholeOption(v: unknown, what: string, min: number, hint = ''): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw invalid(`${what} must be a whole number from ${min} to ${MAX_SAFE}${hint}, got ${String(v)}`);
  }
  return v;
}

function checkDelay(v: unknown, what: string): number {
  if (typeof v === 'string') return parseDuration(v, what);
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MAX_SAFE) {
    throw invalid(`${what} must be a number of ms from 0 to ${MAX_SAFE} (or a duration such as "5s"), got ${String(v)}`);
  }
  return Math.floor(v);
}

/** The longest run time limit, ms: a Node timer's longest delay (lua/jobs.lua MAX_TIMEOUT_MS agrees). */
export const MAX_TIMEOUT_MS = 2147483647;

/** A run time limit (the job option, the Worker's default): a whole number of ms from 1 to MAX_TIMEOUT_MS. */
export function checkTimeout(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > MAX_TIMEOUT_MS) {
    throw invalid(`${what} must be a whole number of ms from 1 to ${MAX_TIMEOUT_MS}, got ${String(v)}`);
  }
  return v;
}

/** The longest retention age, in seconds: its ms still fit a safe integer (glidemq_finish's limit). */
const MAX_RETENTION_AGE_S = Math.floor(Number.MAX_SAFE_INTEGER / 1000);

export function checkRetention(v: Retention | undefined, what: string): Retention | undefined {
  if (v === undefined || typeof v === 'boolean') return v;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw invalid(`${what} must be true, false, a whole number from 0 to ${MAX_SAFE} (how many jobs to keep) or {count?, age?} (age in seconds), got ${v}`);
    }
    return v;
  }
  if (typeof v === 'object' && v !== null) {
    if (v.count !== undefined) wholeOption(v.count, `${what}.count`, 0);
    if (v.age !== undefined && (typeof v.age !== 'number' || !Number.isFinite(v.age) || v.age < 0 || v.age > MAX_RETENTION_AGE_S)) {
      throw invalid(`${what}.age must be a number of seconds from 0 to ${MAX_RETENTION_AGE_S} (BullMQ's unit: { age: 3600 } keeps an hour), got ${String(v.age)}`);
    }
    if (v.limit !== undefined) wholeOption(v.limit, `${what}.limit`, 0);
    return v;
  }
  throw invalid(`${what} must be true, false, a count or {count?, age?} (age in seconds)`);
}

/**
 * Encodes a retention rule for glidemq_finish: '' keep, '0' remove now, 'count:N', 'age:MS' (the
 * rule's age is in seconds), 'agecount:MS:N' (both: a job stays only while it satisfies each).
 */
export function encodeRetention(v: Retention | undefined): string {
  if (v === undefined || v === false) return '';
  if (v === true) return '0';
  if (typeof v === 'number') return v === 0 ? '0' : `count:${upToSafe(v)}`;
  if (v.count === 0) return '0';
  const ms = v.age === undefined ? undefined : upToSafe(v.age * 1000);
  if (ms !== undefined && v.count !== undefined) return `agecount:${ms}:${upToSafe(v.count)}`;
  if (v.count !== undefined) return `count:${upToSafe(v.count)}`;
  if (ms !== undefined) return `age:${ms}`;
  return '';
}

/**
 * A rule's number as glidemq_finish takes it: whole, at most 2^53 - 1. Options are checked at add,
 * but a job an older version stored may hold a larger count (it then keeps every job, as before).
 */
function upToSafe(n: number): number {
  return Math.min(Math.floor(n), MAX_SAFE);
}

export interface EncodedJob {
  args: (string | number)[];
}

/**
 * Validates one job and returns its 12-field argument group for glidemq_add. `jobId` is the job's
 * id when the caller holds it apart from `opts` (a flow's node: its options object is shared by
 * siblings and not copied per job); by default, `opts.jobId`.
 */
export function encodeJob(name: string, data: unknown, opts: JobOptions = {}, jobId: string = opts.jobId ?? ''): (string | number)[] {
  checkJobName(name);
  const json = dataJson(data);
  checkSizeLimit(name, json, opts.sizeLimit);
  const delay = opts.delay === undefined ? 0 : checkDelay(opts.delay, 'delay');
  // 0: none, as BullMQ, glidemq_add and changePriority read it
  const priority = opts.priority ?? 0;
  if (!Number.isInteger(priority) || priority < 0 || priority > MAX_PRIORITY) {
    throw invalid(`priority must be a whole number from 1 (served first) to ${MAX_PRIORITY}, or 0 for none, got ${String(opts.priority)}`);
  }
  const attempts = wholeOption(opts.attempts ?? 1, 'attempts', 1);
  // ('' takes the next id, as leaving it out does: BullMQ reads it so)
  checkJobId(jobId);
  if (priority > 0 && opts.lifo) throw invalid('a job cannot be both prioritized and LIFO');
  const group = encodeGroup(opts.group);
  if (group && (priority > 0 || opts.lifo)) {
    throw invalid("a group job runs in its group's order: it cannot be prioritized or LIFO");
  }
  if (opts.dedup !== undefined && (opts.deduplication ?? opts.debounce) !== undefined) {
    throw invalid('a job takes dedup (glidemq\'s form) or deduplication (BullMQ\'s form), not both: keep one (the defaultJobOptions count too)');
  }
  const dedup = opts.dedup ?? fromDeduplication(bullmqDeduplication(opts), delay);
  const stored: StoredOptions = {};
  if (opts.timestamp !== undefined) {
    if (typeof opts.timestamp !== 'number' || !Number.isFinite(opts.timestamp) || opts.timestamp < 0 || opts.timestamp > MAX_SAFE) {
      throw invalid(`timestamp must be a time in ms since the epoch, from 0 to ${MAX_SAFE}, got ${String(opts.timestamp)}`);
    }
    stored.timestamp = Math.floor(opts.timestamp);
  }
  const backoff = parseBackoff(opts.backoff, true);
  if (backoff) stored.backoff = backoff;
  if (opts.timeout !== undefined) stored.timeout = checkTimeout(opts.timeout, 'timeout');
  const roc = checkRetention(opts.removeOnComplete, 'removeOnComplete');
  const rof = checkRetention(opts.removeOnFail, 'removeOnFail');
  // an explicit false is kept: it overrides a Worker-level rule
  if (roc !== undefined) stored.removeOnComplete = roc;
  if (rof !== undefined) stored.removeOnFail = rof;
  if (opts.keepLogs !== undefined && wholeOption(opts.keepLogs, 'keepLogs', 0, ' (0 or none: keep every line)') > 0) {
    stored.keepLogs = opts.keepLogs;
  }
  for (const policy of FAILURE_POLICIES) {
    const v = opts[policy];
    if (v !== undefined && typeof v !== 'boolean') throw invalid(`${policy} must be true or false, got ${String(v)}`);
    if (v) stored[policy] = true;
  }
  const encodedDedup = encodeDedup(dedup, delay);
  Object.assign(stored, storedDedup(opts));
  if (opts.telemetry !== undefined) {
    const telemetry = storedTelemetry(opts.telemetry);
    if (telemetry) stored.telemetry = telemetry;
  }
  const storedJson = Object.keys(stored).length ? JSON.stringify(stored) : '';
  return [jobId, name, json, delay, priority, opts.lifo ? '1' : '0', attempts, storedJson, ...encodedDedup, group];
}

/**
 * encodeJob for a job given the very options object another job's group `like` was encoded from
 * (siblings of a flow sharing one options object): those options are valid and encode alike, so
 * only the name, data and id are checked (as encodeJob checks them, with its messages) and encoded
 * anew. `like` is not changed.
 */
export function encodeJobLike(like: readonly (string | number)[], name: string, data: unknown, opts: JobOptions, jobId: string): (string | number)[] {
  checkJobName(name);
  const json = dataJson(data);
  checkSizeLimit(name, json, opts.sizeLimit);
  checkJobId(jobId);
  const group = like.slice();
  group[0] = jobId;
  group[1] = name;
  group[2] = json;
  return group;
}

/**
 * The hash fields glidemq_add stores for the job `shape` encodes (its encodeJob argument group;
 * lua/jobs.lua insertJob writes them), so a Job made from them reads as getJob reads the stored
 * job. `dataJson` is its data as sent; `ts` the server time of the add.
 */
export function addedFields(id: string, dataJson: string, shape: (string | number)[], ts: number): Record<string, string> {
  const h: Record<string, string> = { id, name: String(shape[1]), data: dataJson, ts: String(ts) };
  if (Number(shape[3]) > 0) h.delay = String(shape[3]);
  if (Number(shape[4]) > 0) h.priority = String(shape[4]);
  if (shape[5] === '1') h.lifo = '1';
  if (Number(shape[6]) > 1) h.attempts = String(shape[6]);
  if (shape[7] !== '') h.opts = String(shape[7]);
  if (shape[11] !== '') h.grp = (JSON.parse(String(shape[11])) as { id: string }).id;
  return h;
}

/**
 * A job's options over the queue's defaultJobOptions, as BullMQ merges them: shallowly (an option
 * the job names replaces the default whole, an object too), and never the default's jobId.
 */
export function withDefaults(defaults: JobOptions | undefined, opts: JobOptions | undefined): JobOptions {
  if (!defaults) return opts ?? {};
  const merged: JobOptions = { ...defaults, ...opts };
  if (opts?.jobId === undefined) delete merged.jobId;
  return merged;
}

/** The delay before the next attempt, given how many attempts have been made so far. */
export function backoffDelay(backoff: BackoffOptions | undefined, attemptsMade: number, random = Math.random): number {
  if (!backoff) return 0;
  const delay = backoff.delay ?? 0;
  const base = backoff.type === 'exponential' ? delay * 2 ** Math.max(0, attemptsMade - 1) : delay;
  const jitter = backoff.jitter ?? 0;
  return Math.max(0, Math.round(base * (1 - jitter * random())));
}

export interface BulkJob {
  name: string;
  data: unknown;
  opts?: JobOptions;
}

