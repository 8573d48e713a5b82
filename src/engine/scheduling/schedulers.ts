/**
 * Job schedulers: a cron pattern (with a time zone) or a fixed interval that adds a job from a
 * template each time it comes due. Definitions and next-run times live in the queue's schedulers
 * hash (lua/schedulers.lua); workers fire them from their promotion tick (src/engine/administering/upkeep.ts).
 * Every time in a record is the server's: the server stamps createdAt/updatedAt, computes an
 * interval's slots and decides what is due; this side computes only cron slots (Lua cannot), and
 * only after a time the server gave (TIME, or the `now` glidemq_upkeep returns).
 */
import { invalid, NotSupportedError } from '../shared/errors.js';
import { parseDuration } from '../shared/duration.js';
import { nextCronTime, parseCron, validateCron, validateTimeZone } from './cron.js';
import { encodeJob, type JobOptions, type StoredOptions } from '../producing/options.js';

/** The shortest interval accepted: firing precision is one promotion tick anyway (lua/scheduler-records.lua agrees). */
export const MIN_EVERY_MS = 1000;
/** The longest scheduler name, in bytes (the library's limit on names and ids). */
export const MAX_SCHEDULER_NAME_BYTES = 256;
/** The largest time a record holds (lua/scheduler-records.lua SCHEDULER_MAX_MS agrees). */
const MAX_RECORD_MS = 99_999_999_999_999;

export interface SchedulerTiming {
  /** Five-field cron pattern (minute hour day-of-month month day-of-week), or @hourly etc. */
  pattern?: string;
  /** Time zone of the pattern (IANA name); UTC when not given. */
  tz?: string;
  /** Fixed interval in ms (or a duration text such as 5m), counted from when it was created. */
  every?: number | string;
  /**
   * The first run is not before this time (ms since the epoch, a Date or a date text): an
   * interval's first run is then, or at once if it has passed; a pattern's is its first slot after.
   */
  startDate?: number | Date | string;
  /** The first run is at once (the next promotion tick); then on the pattern or every interval. */
  immediately?: boolean;
}

export interface SchedulerTemplate {
  /** Name of the jobs it adds (default: the scheduler's name). */
  name?: string;
  data?: unknown;
  /** Options of the jobs it adds (not jobId, dedup or group: every run is a plain new job). */
  opts?: JobOptions;
}

export interface SchedulerInfo {
  name: string;
  pattern?: string;
  tz?: string;
  every?: number;
  /** Its startDate, when it was given one. */
  startDate?: number;
  /** When it fires next (ms since epoch). */
  nextRun: number;
  /** The slot it fired last, and the job that run added. */
  lastRun?: number;
  lastJobId?: string;
  createdAt: number;
  updatedAt: number;
  template: { name: string; data: unknown; opts: JobOptions };
}

/** The JSON record stored per scheduler (see lua/schedulers.lua). */
interface SchedulerRecord {
  name: string;
  pattern?: string;
  tz?: string;
  every?: number;
  timing: string;
  anchor?: number;
  /** An interval's first run (0: at once; lua/schedulers.lua); a pattern's, for the record. */
  startDate?: number;
  nextRun: number;
  lastRun?: number;
  lastJobId?: string;
  createdAt: number;
  updatedAt: number;
  job: { name: string; data: string; delay: number; priority: number; lifo: string; attempts: number; opts: string };
}

export function validateSchedulerName(name: string): string {
  if (typeof name !== 'string' || name.length === 0) throw invalid('a scheduler needs a name');
  if (Buffer.byteLength(name) > MAX_SCHEDULER_NAME_BYTES || /\p{Cc}/u.test(name)) {
    throw invalid(`scheduler name "${name}" is invalid: at most ${MAX_SCHEDULER_NAME_BYTES} bytes, no control characters`);
  }
  return name;
}

/**
 * Validates a definition and builds the record to store. Times are left for the server to set
 * (lua/schedulers.lua): createdAt, updatedAt, and an interval's anchor and first run. A cron
 * pattern's first run is its first slot after `serverTime()` (asked only for a cron pattern, and
 * only once the definition is valid).
 */
export async function buildRecord(name: string, timing: SchedulerTiming, template: SchedulerTemplate, serverTime: () => Promise<number>): Promise<SchedulerRecord> {
  validateSchedulerName(name);
  if (!timing || typeof timing !== 'object') throw invalid(`scheduler ${name}: give a cron pattern or an interval (every)`);
  const hasPattern = timing.pattern !== undefined;
  const hasEvery = timing.every !== undefined;
  if (hasPattern === hasEvery) throw invalid(`scheduler ${name}: give either a cron pattern or an interval (every), not ${hasPattern ? 'both' : 'neither'}`);
  const opts = template.opts ?? {};
  if (opts.jobId !== undefined) throw invalid(`scheduler ${name}: jobs it adds cannot have a fixed jobId (every run adds a new job)`);
  if (opts.dedup !== undefined || opts.deduplication !== undefined || opts.debounce !== undefined) {
    throw invalid(`scheduler ${name}: jobs it adds cannot use dedup (dedup, deduplication or debounce): every run adds a new job`);
  }
  if (opts.group !== undefined) throw invalid(`scheduler ${name}: jobs it adds cannot be group jobs (not supported yet)`);
  const group = encodeJob(template.name ?? name, template.data ?? {}, opts);
  // a record holds times up to MAX_RECORD_MS (lua/scheduler-records.lua checks the job's delay too)
  if (Number(group[3]) > MAX_RECORD_MS) throw invalid(`scheduler ${name}: the job's delay must be at most ${MAX_RECORD_MS} ms, got ${group[3]}`);
  const job = {
    name: String(group[1]),
    data: String(group[2]),
    delay: Number(group[3]),
    priority: Number(group[4]),
    lifo: String(group[5]),
    attempts: Number(group[6]),
    opts: String(group[7]),
  };
  const base = { name, nextRun: 0, createdAt: 0, updatedAt: 0, job };
  const start = firstRunOptions(name, timing);
  if (hasPattern) {
    if (timing.tz !== undefined) validateTimeZone(timing.tz);
    const pattern = parseCron(timing.pattern as string).source;
    const tz = timing.tz;
    const rec: SchedulerRecord = { ...base, pattern, ...(tz ? { tz } : {}), timing: `cron:${pattern}@${tz ?? 'UTC'}` };
    const now = await serverTime();
    validateCron(pattern, tz, now);
    if (start.startDate !== undefined) rec.startDate = start.startDate;
    // at once: the server's now (due at the next tick); else the first slot after now and startDate
    rec.nextRun = start.immediately ? now : nextRunAfter(rec, Math.max(now, start.startDate ?? 0));
    return rec;
  }
  if (timing.tz !== undefined) throw invalid(`scheduler ${name}: a time zone only applies to a cron pattern`);
  const every = parseDuration(timing.every as number | string, `scheduler ${name}: every`);
  if (every < MIN_EVERY_MS) throw invalid(`scheduler ${name}: every must be at least ${MIN_EVERY_MS} ms, got ${every}`);
  if (every > MAX_RECORD_MS) throw invalid(`scheduler ${name}: every must be at most ${MAX_RECORD_MS} ms, got ${every}`);
  // the server sets the first run from startDate (0: at once), or one interval after its now
  const startDate = start.immediately ? 0 : start.startDate;
  return { ...base, every, timing: `every:${every}`, ...(startDate !== undefined ? { startDate } : {}) };
}

/** Checks `startDate` and `immediately` (at most one of them) and returns them, the date in ms. */
function firstRunOptions(name: string, timing: SchedulerTiming): { startDate?: number; immediately: boolean } {
  if (timing.immediately !== undefined && typeof timing.immediately !== 'boolean') {
    throw invalid(`scheduler ${name}: immediately must be true or false, got ${String(timing.immediately)}`);
  }
  const immediately = timing.immediately === true;
  if (timing.startDate === undefined) return { immediately };
  if (immediately) throw invalid(`scheduler ${name}: give startDate or immediately, not both`);
  return { startDate: toEpochMs(timing.startDate, `scheduler ${name}: startDate`), immediately };
}

/** A time given as ms since the epoch, a Date or a date text, in whole ms. */
function toEpochMs(value: number | Date | string, what: string): number {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : value;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_RECORD_MS) {
    throw invalid(`${what} must be a time (ms since the epoch, a Date or a date text) from 1970 on, got ${String(value)}`);
  }
  return Math.floor(ms);
}

/** The first slot of the scheduler strictly after `after`. */
export function nextRunAfter(rec: Pick<SchedulerRecord, 'name' | 'pattern' | 'tz' | 'every' | 'anchor'>, after: number): number {
  if (rec.pattern !== undefined) {
    const next = nextCronTime(parseCron(rec.pattern), after, rec.tz);
    if (next === undefined) throw invalid(`scheduler ${rec.name}: cron pattern "${rec.pattern}" never fires`);
    return next;
  }
  const every = Number(rec.every);
  if (!(every > 0)) throw invalid(`scheduler ${rec.name}: has neither a valid pattern nor interval`);
  const anchor = Number(rec.anchor ?? 0);
  if (after < anchor) return anchor + every;
  return anchor + (Math.floor((after - anchor) / every) + 1) * every;
}

export function parseRecord(text: string): SchedulerRecord {
  return JSON.parse(text) as SchedulerRecord;
}

/** The public view of a stored record. */
export function describeRecord(rec: SchedulerRecord): SchedulerInfo {
  const j = rec.job;
  const stored = (j.opts ? JSON.parse(j.opts) : {}) as StoredOptions;
  const opts: JobOptions = {
    ...(j.delay > 0 ? { delay: j.delay } : {}),
    ...(j.priority > 0 ? { priority: j.priority } : {}),
    ...(j.lifo === '1' ? { lifo: true } : {}),
    ...(j.attempts > 1 ? { attempts: j.attempts } : {}),
    ...stored,
  };
  return {
    name: rec.name,
    ...(rec.pattern !== undefined ? { pattern: rec.pattern } : {}),
    ...(rec.tz !== undefined ? { tz: rec.tz } : {}),
    ...(rec.every !== undefined ? { every: rec.every } : {}),
    ...(rec.startDate ? { startDate: rec.startDate } : {}),
    nextRun: rec.nextRun,
    ...(rec.lastRun !== undefined ? { lastRun: rec.lastRun } : {}),
    ...(rec.lastJobId !== undefined ? { lastJobId: rec.lastJobId } : {}),
    createdAt: rec.createdAt,
    updatedAt: rec.updatedAt,
    template: { name: j.name, data: JSON.parse(j.data), opts },
  };
}

// ---- BullMQ's job scheduler API (Queue.upsertJobScheduler and the calls around it) ----

/** BullMQ's RepeatOptions as upsertJobScheduler takes them. */
export interface RepeatOptions {
  /** Cron pattern: five fields, or BullMQ's six with a seconds field of 0. */
  pattern?: string;
  /** Interval in ms; the first job is added at once (as BullMQ), unless startDate says when. */
  every?: number;
  tz?: string;
  startDate?: Date | string | number;
  /** A pattern's first job at once (an interval's is at once anyway). */
  immediately?: boolean;
  /** Refused (NotSupportedError): a glidemq scheduler runs until removed. */
  limit?: number;
  /** Refused (NotSupportedError): a glidemq scheduler runs until removed. */
  endDate?: Date | string | number;
  /** Refused (NotSupportedError): an interval counts from its first run. */
  offset?: number;
  /** Refused (NotSupportedError): glidemq keeps no iteration count. */
  count?: number;
}

/** The job a scheduler adds at each run, as BullMQ names its parts. */
export interface JobSchedulerTemplate<D = unknown> {
  /** Default: the scheduler's id. */
  name?: string;
  data?: D;
  opts?: JobOptions;
}

/** BullMQ's JobSchedulerJson, with the fields glidemq keeps. */
export interface JobSchedulerJson<D = unknown> {
  /** The scheduler's id. */
  key: string;
  /** The name of the jobs it adds. */
  name: string;
  pattern?: string;
  every?: number;
  tz?: string;
  startDate?: number;
  /** When it adds its next job (ms since the epoch, the server's clock). */
  next?: number;
  template?: { data?: D; opts?: JobOptions };
}

const SUPPORTED_REPEAT = ['pattern', 'every', 'tz', 'startDate', 'immediately'];
const REFUSED_REPEAT: Record<string, string> = {
  limit: 'a glidemq scheduler runs until it is removed; call removeJobScheduler when it should stop',
  endDate: 'a glidemq scheduler runs until it is removed; call removeJobScheduler when it should stop',
  offset: 'an interval counts from its first run; give startDate to place it',
  count: 'glidemq keeps no iteration count',
};

function notSupported(message: string): NotSupportedError {
  return new NotSupportedError('ERR_NOT_SUPPORTED', message, true);
}

/**
 * BullMQ's repeat options as glidemq's timing. Options glidemq has no equivalent for are refused
 * by name (NotSupportedError) rather than ignored: a scheduler that silently ran past its limit
 * or end date would add jobs the application never asked for.
 */
export function timingFromRepeat(id: string, repeat: RepeatOptions): SchedulerTiming {
  if (!repeat || typeof repeat !== 'object') {
    throw invalid(`upsertJobScheduler ${id}: repeat options must be an object like { every: 60000 } or { pattern: '0 * * * *' }`);
  }
  for (const [key, value] of Object.entries(repeat)) {
    if (value === undefined || SUPPORTED_REPEAT.includes(key)) continue;
    const why = REFUSED_REPEAT[key] ?? `glidemq supports ${SUPPORTED_REPEAT.join(', ')}`;
    throw notSupported(`upsertJobScheduler ${id}: repeat option ${key} is not supported: ${why}`);
  }
  const timing: SchedulerTiming = {};
  if (repeat.pattern !== undefined) timing.pattern = fiveFieldPattern(id, repeat.pattern);
  if (repeat.every !== undefined) timing.every = repeat.every;
  if (repeat.tz !== undefined) timing.tz = repeat.tz;
  if (repeat.startDate !== undefined) timing.startDate = repeat.startDate;
  if (repeat.immediately !== undefined) timing.immediately = repeat.immediately;
  // BullMQ adds an interval's first job at once, whatever `immediately` says, unless startDate is given
  if (repeat.every !== undefined && repeat.pattern === undefined && repeat.startDate === undefined) timing.immediately = true;
  return timing;
}

/** BullMQ's six-field pattern with a seconds field of 0 is the five-field one without it. */
function fiveFieldPattern(id: string, pattern: string): string {
  if (typeof pattern !== 'string') return pattern;
  const fields = pattern.trim().split(/\s+/);
  if (fields.length !== 6) return pattern;
  if (fields[0] === '0') return fields.slice(1).join(' ');
  throw notSupported(`upsertJobScheduler ${id}: cron pattern "${pattern}" fires at seconds "${fields[0]}"; glidemq patterns have minute precision (five fields, or six with seconds 0); use every for shorter periods`);
}

/** A scheduler as BullMQ's getJobScheduler describes it. */
export function toJobSchedulerJson(info: SchedulerInfo): JobSchedulerJson {
  return {
    key: info.name,
    name: info.template.name,
    ...(info.pattern !== undefined ? { pattern: info.pattern } : {}),
    ...(info.every !== undefined ? { every: info.every } : {}),
    ...(info.tz !== undefined ? { tz: info.tz } : {}),
    ...(info.startDate !== undefined ? { startDate: info.startDate } : {}),
    next: info.nextRun,
    template: { data: info.template.data, opts: info.template.opts },
  };
}
