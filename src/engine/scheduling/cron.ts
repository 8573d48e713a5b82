/**
 * Five-field cron patterns (minute hour day-of-month month day-of-week) and the next time such a
 * pattern fires after a given instant, in a time zone (IANA name, resolved through Intl; UTC when
 * none is given, so every worker computes the same slots wherever it runs).
 *
 * Each field takes `*`, a value, a range `a-b`, a step `*∕n`, `a-b∕n` or `a∕n`, and comma lists of
 * those; months and weekdays also take names (JAN, MON). Weekday 0 and 7 are both Sunday. When both
 * day fields are restricted, a day matches if either matches (as classic cron does). Wall-clock
 * times repeated by a DST change fire once (the first time); times skipped by one fire at the
 * instant the skipped wall time maps to (e.g. 02:30 on a spring-forward night fires at 03:30).
 */
import { invalid } from '../shared/errors.js';

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: string[];
}

const FIELDS: FieldSpec[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] },
  { name: 'day of week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] },
];

const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** How far ahead a search looks: 28 years holds every weekday/leap-day combination. */
const SEARCH_YEARS = 28;
const MINUTE = 60_000;

export interface CronPattern {
  source: string;
  minutes: boolean[];
  hours: boolean[];
  days: boolean[];
  months: boolean[];
  weekdays: boolean[];
  /** Whether each day field is restricted (does not start with `*`). */
  dayRestricted: boolean;
  weekdayRestricted: boolean;
}

export function parseCron(pattern: string): CronPattern {
  if (typeof pattern !== 'string' || pattern.trim() === '') throw invalid('cron pattern is empty');
  const text = MACROS[pattern.trim().toLowerCase()] ?? pattern.trim();
  const parts = text.split(/\s+/);
  if (parts.length !== 5) {
    throw invalid(`cron pattern "${pattern}" has ${parts.length} fields; expected 5 (minute hour day-of-month month day-of-week)`);
  }
  const sets = parts.map((p, i) => parseField(p, FIELDS[i], pattern));
  const weekdays = sets[4];
  if (weekdays[7]) weekdays[0] = true;
  return {
    source: pattern.trim(),
    minutes: sets[0],
    hours: sets[1],
    days: sets[2],
    months: sets[3],
    weekdays: weekdays.slice(0, 7),
    dayRestricted: !parts[2].startsWith('*') && parts[2] !== '?',
    weekdayRestricted: !parts[4].startsWith('*') && parts[4] !== '?',
  };
}

function parseField(text: string, spec: FieldSpec, pattern: string): boolean[] {
  const set: boolean[] = new Array(spec.max + 1).fill(false);
  const bad = (why: string) => invalid(`cron pattern "${pattern}": ${spec.name} field "${text}" ${why}`);
  for (const item of text.split(',')) {
    if (item === '') throw bad('has an empty list item');
    const [rangeText, stepText, extra] = item.split('/');
    if (extra !== undefined) throw bad('has more than one "/"');
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText) || Number(stepText) < 1) throw bad(`has an invalid step "${stepText}"`);
      step = Number(stepText);
    }
    let lo: number;
    let hi: number;
    if (rangeText === '*' || rangeText === '?') {
      lo = spec.min;
      hi = spec.max === 7 ? 6 : spec.max;
    } else {
      const dash = rangeText.split('-');
      if (dash.length > 2) throw bad(`has an invalid range "${rangeText}"`);
      lo = value(dash[0], spec, bad);
      // `a/n` means from a to the end of the field
      hi = dash.length === 2 ? value(dash[1], spec, bad) : stepText !== undefined ? (spec.max === 7 ? 6 : spec.max) : lo;
      if (lo > hi) throw bad(`has a range that runs backwards (${rangeText})`);
    }
    for (let v = lo; v <= hi; v += step) set[v] = true;
  }
  return set;
}

function value(text: string, spec: FieldSpec, bad: (why: string) => Error): number {
  const upper = text.toUpperCase();
  const named = spec.names?.indexOf(upper) ?? -1;
  if (named >= 0) return named + (spec.name === 'month' ? 1 : 0);
  if (!/^\d+$/.test(text)) throw bad(`has "${text}", which is not a number${spec.names ? ' or a name' : ''}`);
  const n = Number(text);
  if (n < spec.min || n > spec.max) throw bad(`has ${n}, outside ${spec.min}-${spec.max}`);
  return n;
}

/** Throws a usage error unless `tz` is a time zone this runtime knows. */
export function validateTimeZone(tz: string): string {
  try {
    formatterFor(tz);
  } catch {
    throw invalid(`unknown time zone "${tz}" (use an IANA name such as Europe/Berlin or America/New_York)`);
  }
  return tz;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(tz, f);
  }
  return f;
}

/** The wall-clock time in `tz` at `instant`, as ms of a UTC date with the same fields. */
export function wallTime(instant: number, tz: string | undefined): number {
  if (!tz || tz === 'UTC') return instant;
  const p: Record<string, number> = {};
  for (const part of formatterFor(tz).formatToParts(new Date(instant))) {
    if (part.type !== 'literal') p[part.type] = Number(part.value);
  }
  const ms = ((instant % 1000) + 1000) % 1000;
  return Date.UTC(p.year, p.month - 1, p.day, p.hour % 24, p.minute, p.second) + ms;
}

/** The first instant whose wall-clock time in `tz` is `wall`; a skipped wall time maps forward. */
export function instantOf(wall: number, tz: string | undefined): number {
  if (!tz || tz === 'UTC') return wall;
  const offBefore = wallTime(wall - 14 * 3_600_000, tz) - (wall - 14 * 3_600_000);
  const offAfter = wallTime(wall + 14 * 3_600_000, tz) - (wall + 14 * 3_600_000);
  const candidates = [...new Set([wall - offBefore, wall - offAfter])].sort((a, b) => a - b);
  for (const c of candidates) if (wallTime(c, tz) === wall) return c;
  return wall - offBefore; // inside a gap: the offset before the change carries it past the gap
}

function dayMatches(p: CronPattern, d: Date): boolean {
  const dom = p.days[d.getUTCDate()];
  const dow = p.weekdays[d.getUTCDay()];
  if (p.dayRestricted && p.weekdayRestricted) return dom || dow;
  if (p.dayRestricted) return dom;
  if (p.weekdayRestricted) return dow;
  return true;
}

/**
 * The first instant strictly after `after` at which the pattern fires in `tz`, on a whole minute.
 * Returns undefined when it never fires (e.g. `0 0 30 2 *`).
 */
export function nextCronTime(p: CronPattern, after: number, tz?: string): number | undefined {
  const startWall = wallTime(after, tz);
  let t = Math.floor(startWall / MINUTE) * MINUTE + MINUTE;
  const lastYear = new Date(startWall).getUTCFullYear() + SEARCH_YEARS;
  for (;;) {
    const d = new Date(t);
    const y = d.getUTCFullYear();
    if (y > lastYear) return undefined;
    const mo = d.getUTCMonth();
    if (!p.months[mo + 1]) {
      t = Date.UTC(y, mo + 1, 1);
      continue;
    }
    const day = d.getUTCDate();
    if (!dayMatches(p, d)) {
      t = Date.UTC(y, mo, day + 1);
      continue;
    }
    const h = d.getUTCHours();
    if (!p.hours[h]) {
      t = Date.UTC(y, mo, day, h + 1);
      continue;
    }
    if (!p.minutes[d.getUTCMinutes()]) {
      t += MINUTE;
      continue;
    }
    const instant = instantOf(t, tz);
    if (instant > after) return instant;
    t += MINUTE; // a repeated wall time that already passed
  }
}

/** Parses and checks that the pattern fires at all; returns the parsed pattern. */
export function validateCron(pattern: string, tz?: string, now = Date.now()): CronPattern {
  const p = parseCron(pattern);
  if (tz) validateTimeZone(tz);
  if (nextCronTime(p, now, tz) === undefined) throw invalid(`cron pattern "${pattern}" never fires`);
  return p;
}
