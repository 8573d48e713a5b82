/** Durations everywhere: a number of milliseconds, or `250ms`, `5s`, `2m`, `1h`. */
import { invalid } from './errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string | number, what = 'duration'): number {
  if (typeof text === 'number') {
    if (!Number.isFinite(text) || text < 0) throw invalid(`${what} must be a non-negative number of milliseconds, got ${text}`);
    return Math.floor(text);
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) throw invalid(`${what}: "${text}" is not a duration (use milliseconds, or 250ms, 5s, 2m, 1h)`);
  const value = Number(m[1]) * UNITS[m[2] ?? 'ms'];
  if (!Number.isSafeInteger(Math.floor(value))) throw invalid(`${what}: "${text}" is too large`);
  return Math.floor(value);
}

/** A whole number within [min, max], with a message that names the option. */
export function parseInteger(text: string | number, what: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = typeof text === 'number' ? text : /^\s*-?\d+\s*$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw invalid(`${what} must be a whole number from ${min} to ${max}, got "${text}"`);
  }
  return n;
}
