/** Checks of numeric options, one wording and one error type (a usage error) for every class. */
import { invalid } from './errors.js';

/** A finite number > 0, rounded down to a whole number (durations and intervals in ms). */
export function positive(n: number, what: string): number {
  if (!Number.isFinite(n) || n <= 0) throw invalid(`${what} must be a positive number, got ${n}`);
  return Math.floor(n);
}

/** A finite number >= 0, rounded down to a whole number. */
export function nonNegative(n: number, what: string): number {
  if (!Number.isFinite(n) || n < 0) throw invalid(`${what} must be a number >= 0, got ${n}`);
  return Math.floor(n);
}

/** A whole number >= 0, as given (a count). */
export function wholeCount(n: number, what: string): number {
  if (!Number.isInteger(n) || n < 0) throw invalid(`${what} must be a whole number >= 0, got ${n}`);
  return n;
}
