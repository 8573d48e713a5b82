/**
 * A BullMQ job or job scheduler as glidemq stores it (`glidemq import-bullmq`): its id (kept when
 * glidemq takes it as a custom id, else renamed), its state, fields and options, and a scheduler's
 * timing and job template. Pure functions: nothing here reads or writes a server.
 */
import type { RestoredDedup, RestoredFlow, RestoreRecord, RestoredState } from '../administering/job-restore.js';
import type { SchedulerTemplate, SchedulerTiming } from '../scheduling/schedulers.js';
import type { BullJob, BullScheduler } from './bullmq-source.js';

/** What a BullMQ id that glidemq cannot keep is renamed to: this prefix, then the id (its characters glidemq refuses as %XX). */
export const RENAMED_ID_PREFIX = 'bullmq-';
const MAX_ID_BYTES = 256;
const MAX_PRIORITY = 2097152;

/** glidemq takes a custom id of 1..256 bytes without ':', braces, whitespace or control characters that is not a whole number. */
export function keepsId(id: string): boolean {
  return id.length > 0 && Buffer.byteLength(id) <= MAX_ID_BYTES && !/^-?\d+$/.test(id) && !/[\s\p{Cc}:{}]/u.test(id);
}

/** The glidemq id of a BullMQ job id: itself when glidemq keeps it, else the renamed form, or undefined when even that is too long. */
export function glidemqId(id: string): string | undefined {
  if (keepsId(id)) return id;
  // (encodeURIComponent writes each of these characters as %XX, and '%' as %25: two renamed ids never meet)
  const renamed = RENAMED_ID_PREFIX + id.replace(/[%\s\p{Cc}:{}]/gu, (c) => encodeURIComponent(c));
  return Buffer.byteLength(renamed) <= MAX_ID_BYTES ? renamed : undefined;
}

function num(v: string | undefined, fallback = 0): number {
  const n = Number(v);
  return v !== undefined && v !== '' && Number.isFinite(n) ? n : fallback;
}

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A BullMQ retention option glidemq reads the same way (true, false, a count, or {age, count}), or undefined. */
function retention(v: unknown): unknown {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return v;
  if (v && typeof v === 'object') {
    const { age, count } = v as { age?: unknown; count?: unknown };
    const out: Record<string, number> = {};
    if (typeof age === 'number' && age >= 0) out.age = age;
    if (typeof count === 'number' && Number.isInteger(count) && count >= 0) out.count = count;
    return Object.keys(out).length ? out : undefined;
  }
  return undefined;
}

/** BullMQ's backoff (a number of ms, or {type, delay}) as glidemq stores it, or undefined. */
function backoff(v: unknown): unknown {
  if (typeof v === 'number' && v >= 0) return { type: 'fixed', delay: v };
  if (v && typeof v === 'object' && typeof (v as { type?: unknown }).type === 'string') {
    const { type, delay, jitter } = v as { type: string; delay?: unknown; jitter?: unknown };
    return {
      type,
      ...(typeof delay === 'number' && delay >= 0 ? { delay } : {}),
      ...(typeof jitter === 'number' && jitter >= 0 && jitter <= 1 ? { jitter } : {}),
    };
  }
  return undefined;
}

const FAILURE_POLICIES = [['fpof', 'failParentOnFailure'], ['idof', 'ignoreDependencyOnFailure'], ['rdof', 'removeDependencyOnFailure'], ['cpof', 'continueParentOnFailure']] as const;

/** The options of a BullMQ job glidemq keeps: attempts, backoff, retention, keepLogs ('kl'), a flow child's failure policy, its deduplication ('de'), and its creation time. */
export function optionsOf(rawOpts: string | undefined, timestamp: number | undefined): { attempts: number; stored: Record<string, unknown> } {
  const o = (parseJson(rawOpts) ?? {}) as Record<string, unknown>;
  const stored: Record<string, unknown> = {};
  const put = (key: string, v: unknown) => {
    if (v !== undefined) stored[key] = v;
  };
  put('backoff', backoff(o.backoff));
  put('removeOnComplete', retention(o.removeOnComplete));
  put('removeOnFail', retention(o.removeOnFail));
  // a flow child's failure policy (BullMQ stores it short: fpof, idof, rdof, cpof)
  for (const [short, long] of FAILURE_POLICIES) if (o[short] === true || o[long] === true) stored[long] = true;
  const d = (o.de ?? o.deduplication) as Record<string, unknown> | undefined;
  if (d && typeof d === 'object' && typeof d.id === 'string' && d.id !== '') {
    const kept: Record<string, unknown> = { id: d.id };
    if (typeof d.ttl === 'number' && d.ttl > 0) kept.ttl = d.ttl;
    for (const flag of ['extend', 'replace'] as const) if (typeof d[flag] === 'boolean') kept[flag] = d[flag];
    stored.deduplication = kept;
  }
  const keep = o.kl ?? o.keepLogs;
  if (typeof keep === 'number' && Number.isInteger(keep) && keep >= 0) stored.keepLogs = keep;
  if (timestamp !== undefined && timestamp >= 0) stored.timestamp = timestamp;
  const attempts = typeof o.attempts === 'number' && Number.isInteger(o.attempts) && o.attempts >= 1 ? o.attempts : 1;
  return { attempts, stored };
}

/** The id BullMQ gives the job of scheduler `id` due at `at` (its next run, waiting or delayed until it runs). */
export function schedulerRunId(id: string, at: number): string {
  return `repeat:${id}:${at}`;
}

function stateOf(job: BullJob): RestoredState {
  switch (job.state) {
    case 'wait':
    case 'paused':
      return 'waiting';
    default:
      return job.state;
  }
}

function stackOf(text: string | undefined): string[] {
  const v = parseJson(text);
  return Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : [];
}

/** The glidemq job key of a BullMQ job key, or undefined when it cannot be named (another prefix). */
export type LinkOf = (bullKey: string) => string | undefined;

/**
 * A job's place in a flow with its links named as glidemq job keys (undefined: none), and the BullMQ
 * job keys of links that could not be named (`lost`).
 */
export function flowOf(job: BullJob, linkOf: LinkOf): { flow?: RestoredFlow; lost: string[] } {
  const lost: string[] = [];
  const map = (key: string) => {
    const to = linkOf(key);
    if (to === undefined) lost.push(key);
    return to;
  };
  const flow: RestoredFlow = {};
  const parent = job.hash.parentKey ? map(job.hash.parentKey) : undefined;
  if (parent) flow.parents = [parent];
  const results = (from: Record<string, string>) => {
    const out: Record<string, string> = {};
    for (const [key, v] of Object.entries(from)) {
      const to = map(key);
      if (to) out[to] = v;
    }
    return Object.keys(out).length ? out : undefined;
  };
  const processed = results(job.processed);
  if (processed) flow.processed = processed;
  // BullMQ's :failed holds the children ignored on failure (and those a continueParentOnFailure
  // let go): job.getIgnoredChildrenFailures reads it, as glidemq's reads :ignored
  const ignored = results(job.failedChildren);
  if (ignored) flow.ignored = ignored;
  if (job.state === 'waiting-children') {
    flow.deps = job.dependencies.map(map).filter((k): k is string => k !== undefined);
    const delay = Math.trunc(num(job.hash.delay));
    if (delay > 0) flow.delay = delay;
  }
  return { ...(Object.keys(flow).length ? { flow } : {}), lost };
}

/** The dedup id a job holds, as glidemq records it: the mode BullMQ's options mean, and the window's time left. */
export function dedupOf(job: BullJob, state: RestoredState): RestoredDedup | undefined {
  if (!job.dedup) return undefined;
  const o = (parseJson(job.hash.opts) ?? {}) as Record<string, unknown>;
  const d = ((o.de ?? o.deduplication) ?? {}) as { extend?: unknown; replace?: unknown };
  const { id, ttl } = job.dedup;
  if (d.replace === true && state === 'delayed') return { id, mode: 'debounce', ttl };
  if (ttl > 0) return { id, mode: d.extend === true ? 'extend' : 'throttle', ttl };
  return { id, mode: 'simple', ttl: 0 };
}

/** The record glidemq_restore stores for `job` under glidemq id `id` (its flow links, when given, already named in glidemq). */
export function recordOf(job: BullJob, id: string, flow?: RestoredFlow): RestoreRecord {
  const h = job.hash;
  const state = stateOf(job);
  const finished = state === 'completed' || state === 'failed';
  const timestamp = h.timestamp !== undefined ? num(h.timestamp) : undefined;
  const { attempts, stored } = optionsOf(h.opts, timestamp);
  const rawPriority = Math.min(Math.max(Math.trunc(num(h.priority)), 0), MAX_PRIORITY);
  const priority = state === 'waiting' ? 0 : state === 'prioritized' ? Math.max(rawPriority, 1) : rawPriority;
  const dedup = dedupOf(job, state);
  const finishedOn = finished ? Math.max(num(h.finishedOn, timestamp ?? 0), 1) : 0;
  let value = '';
  if (state === 'completed') value = h.returnvalue ?? 'null';
  if (state === 'failed') value = h.failedReason ?? '';
  return {
    id,
    state,
    name: h.name || 'default',
    data: h.data ?? '{}',
    runAt: state === 'delayed' ? Math.max(job.runAt ?? num(h.timestamp) + num(h.delay), 1) : 0,
    priority,
    attempts: Math.max(attempts, 1),
    attemptsMade: Math.max(Math.trunc(num(h.atm ?? h.attemptsMade)), 0),
    opts: Object.keys(stored).length ? JSON.stringify(stored) : '',
    value,
    stacktrace: finished ? stackOf(h.stacktrace) : [],
    processedOn: Math.max(Math.trunc(num(h.processedOn)), 0),
    finishedOn,
    logs: job.logs,
    ...(flow ? { flow } : {}),
    ...(dedup ? { dedup } : {}),
  };
}

/** A scheduler's timing and template as glidemq's upsertScheduler takes them, or why it cannot be. */
export function schedulerOf(s: BullScheduler): { timing: SchedulerTiming; template: SchedulerTemplate } | { why: string } {
  const h = s.hash;
  if (Object.keys(h).length === 0) return { why: 'its record is gone (a repeatable job of an older BullMQ): add it again as a glidemq scheduler' };
  // (offset, which BullMQ stores with every scheduler, needs no equivalent: the first run is the
  // next run BullMQ computed with it, and an interval counts from there)
  for (const unsupported of ['endDate', 'limit'] as const) {
    if (h[unsupported] !== undefined) return { why: `it uses ${unsupported}, which glidemq schedulers do not support` };
  }
  const timing: SchedulerTiming = {};
  if (h.every !== undefined) {
    timing.every = num(h.every);
    timing.startDate = s.nextRun;
  } else if (h.pattern !== undefined) {
    timing.pattern = h.pattern;
    if (h.tz) timing.tz = h.tz;
    // a pattern's first run is its first slot after startDate: just before the run BullMQ had next
    timing.startDate = Math.max(s.nextRun - 1, 0);
  } else {
    return { why: 'it has neither every nor pattern' };
  }
  const o = (parseJson(h.opts) ?? {}) as Record<string, unknown>;
  const opts: Record<string, unknown> = {};
  if (typeof o.attempts === 'number' && o.attempts >= 1) opts.attempts = o.attempts;
  if (typeof o.priority === 'number' && o.priority > 0) opts.priority = o.priority;
  const b = backoff(o.backoff);
  if (b !== undefined) opts.backoff = b;
  for (const key of ['removeOnComplete', 'removeOnFail'] as const) {
    const r = retention(o[key]);
    if (r !== undefined) opts[key] = r;
  }
  return { timing, template: { name: h.name || s.id, data: parseJson(h.data) ?? {}, opts } };
}
