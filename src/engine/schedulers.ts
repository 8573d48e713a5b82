/**
 * Job schedulers: a cron pattern (with a time zone) or a fixed interval that adds a job from a
 * template each time it comes due. Definitions and next-run times live in the queue's schedulers
 * hash (lua/schedulers.lua); workers fire them from their promotion tick (src/engine/upkeep.ts).
 * Every time in a record is the server's: the server stamps createdAt/updatedAt, computes an
 * interval's slots and decides what is due; this side computes only cron slots (Lua cannot), and
 * only after a time the server gave (TIME, or the `now` glidemq_upkeep returns).
 */
import { invalid } from './errors.js';
import { parseDuration } from './duration.js';
import { nextCronTime, parseCron, validateCron, validateTimeZone } from './cron.js';
import { encodeJob, type JobOptions, type StoredOptions } from './options.js';

/** The shortest interval accepted: firing precision is one promotion tick anyway (lua/scheduler-records.lua agrees). */
export const MIN_EVERY_MS = 1000;
/** The longest scheduler name, in bytes (the library's limit on names and ids). */
export const MAX_SCHEDULER_NAME_BYTES = 256;

export interface SchedulerTiming {
  /** Five-field cron pattern (minute hour day-of-month month day-of-week), or @hourly etc. */
  pattern?: string;
  /** Time zone of the pattern (IANA name); UTC when not given. */
  tz?: string;
  /** Fixed interval in ms (or a duration text such as 5m), counted from when it was created. */
  every?: number | string;
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
  if (opts.dedup !== undefined) throw invalid(`scheduler ${name}: jobs it adds cannot use dedup`);
  if (opts.group !== undefined) throw invalid(`scheduler ${name}: jobs it adds cannot be group jobs (not supported yet)`);
  const group = encodeJob(template.name ?? name, template.data ?? {}, opts);
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
  if (hasPattern) {
    if (timing.tz !== undefined) validateTimeZone(timing.tz);
    const pattern = parseCron(timing.pattern as string).source;
    const tz = timing.tz;
    const rec: SchedulerRecord = { ...base, pattern, ...(tz ? { tz } : {}), timing: `cron:${pattern}@${tz ?? 'UTC'}` };
    const now = await serverTime();
    validateCron(pattern, tz, now);
    rec.nextRun = nextRunAfter(rec, now);
    return rec;
  }
  if (timing.tz !== undefined) throw invalid(`scheduler ${name}: a time zone only applies to a cron pattern`);
  const every = parseDuration(timing.every as number | string, `scheduler ${name}: every`);
  if (every < MIN_EVERY_MS) throw invalid(`scheduler ${name}: every must be at least ${MIN_EVERY_MS} ms, got ${every}`);
  return { ...base, every, timing: `every:${every}` };
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
    nextRun: rec.nextRun,
    ...(rec.lastRun !== undefined ? { lastRun: rec.lastRun } : {}),
    ...(rec.lastJobId !== undefined ? { lastJobId: rec.lastJobId } : {}),
    createdAt: rec.createdAt,
    updatedAt: rec.updatedAt,
    template: { name: j.name, data: JSON.parse(j.data), opts },
  };
}
