/**
 * Reading a job's stored hash (lua/jobs.lua insertJob writes it): its data, its options with the
 * fields the server keeps beside them, numbers and JSON values, each read so that a corrupt or
 * foreign field gives a default (or, for the data, a reason the job must not run), never a throw.
 * Job.fromFields assembles a Job from these; every job a worker claims passes through here.
 */
import type { StoredOptions } from '../producing/options.js';

/** The job's data, parsed once; `unusable` says why a worker must not run a corrupt or foreign hash. */
export function readData(h: Record<string, string>): { value: any; unusable?: string } {
  if (h.data === undefined) return { value: {}, unusable: 'the job hash has no data field (corrupt, or not written by glidemq)' };
  let value: unknown;
  let bad: Error | undefined;
  try {
    value = JSON.parse(h.data);
  } catch (err) {
    bad = err as Error;
    value = {};
  }
  if (h.name === undefined) return { value, unusable: 'the job hash has no name field (corrupt, or not written by glidemq)' };
  if (bad) return { value, unusable: `the job data is not valid JSON (${bad.message}): corrupt, or not written by glidemq` };
  return { value };
}

export function num(v: string | undefined, d: number): number {
  if (v === undefined) return d;
  const n = Number(v);
  return Number.isFinite(n) ? n : d;
}

export function parseJson<T>(text: string | undefined, fallback: T): T {
  if (text === undefined || text === '') return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

/** A job's options as a Job holds them: what the add stored, and the fields kept beside them. */
export type JobOpts = StoredOptions & { attempts: number; delay: number; priority: number; lifo: boolean };

/**
 * The job's options: the stored `opts` JSON (an object, else none) with attempts, delay, priority
 * and lifo from their own fields. Assigned, not spread: spreading a JSON.parse result costs several
 * µs per job.
 */
export function readOptions(h: Record<string, string>): JobOpts {
  const opts = parseOptions(h.opts);
  opts.attempts = num(h.attempts, 1);
  opts.delay = num(h.delay, 0);
  opts.priority = num(h.priority, 0);
  opts.lifo = h.lifo === '1';
  return opts as unknown as JobOpts;
}

/**
 * The last options text that parsed to a flat object (no value an object or array), and a copy of
 * that object: the jobs of a bulk or a producer mostly share one text, and copying its few values
 * costs a worker a fifth of parsing it again (~60 against ~300 ns per job). Each job gets its own
 * object, as from JSON.parse.
 */
let lastText: string | undefined;
let lastFlat: Record<string, unknown> | undefined;

/** The stored options text as an object of the job's own (none, or not an object: {}). */
function parseOptions(text: string | undefined): Record<string, unknown> {
  if (text !== undefined && text === lastText) {
    const copy: Record<string, unknown> = {};
    for (const k of Object.keys(lastFlat!)) copy[k] = lastFlat![k];
    return copy;
  }
  const opts = parseJson<Record<string, unknown>>(text, {});
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts)) return {};
  if (text !== undefined && isFlat(opts)) {
    lastText = text;
    lastFlat = {};
    for (const k of Object.keys(opts)) lastFlat[k] = opts[k];
  }
  return opts;
}

/** No value is an object or an array, and no name is one a copy by assignment would not keep as it is. */
function isFlat(o: Record<string, unknown>): boolean {
  for (const k of Object.keys(o)) {
    if (k === '__proto__') return false;
    const v = o[k];
    if (v !== null && typeof v === 'object') return false;
  }
  return true;
}
