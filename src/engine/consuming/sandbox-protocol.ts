/**
 * The messages between a Worker and its sandbox children (sandbox-pool.ts, sandbox-child.ts): one
 * message each way per job in the common case (`run`, then `done`), plus a request and its reply
 * for each job call the processor makes (progress, logs, data, moveToDelayed), which the parent
 * makes on the real Job, under its claim.
 */
import { isUnrecoverable, RateLimitError, UnrecoverableError } from '../shared/errors.js';

/**
 * A child process's second argument when the kernel kills it as its parent ends (sandbox-channel.ts
 * parentDeathWrapper): it then starts no watchdog of its own (sandbox-child.ts).
 */
export const DIES_WITH_PARENT = 'dies-with-parent';

/** The job as the sandboxed processor sees it (BullMQ's SandboxedJob fields). */
export interface WireJob {
  id: string;
  name: string;
  data: unknown;
  opts: unknown;
  attemptsMade: number;
  attemptsStarted: number;
  stalledCount: number;
  timestamp: number;
  delay: number;
  progress: unknown;
  processedOn?: number;
  token?: string;
  queueName?: string;
  queueQualifiedName?: string;
  parent?: { id: string; queueKey: string };
  parentKey?: string;
}

/** An error as it crosses: enough to rebuild one that fails, retries or parks the job the same way. */
export interface WireError {
  name: string;
  message: string;
  stack?: string;
  /** UnrecoverableError (or one branded as such): no retry. */
  unrecoverable?: boolean;
}

/** The job calls a sandboxed processor may make; each runs in the parent on the real Job. */
export const SANDBOX_CALLS = [
  'updateProgress',
  'log',
  'updateData',
  'clearLogs',
  'moveToDelayed',
  'moveToDelayedIn',
  'moveToWaitingChildren',
  'getChildrenValues',
  'getIgnoredChildrenFailures',
  'getDependenciesCount',
] as const;
export type SandboxCall = (typeof SANDBOX_CALLS)[number];

/** Parent to child. `r` numbers a child's runs: a job call names the run that made it. */
export type ToChild =
  | { t: 'run'; r: number; job: WireJob }
  | { t: 'abort'; r: number; reason: string }
  | { t: 'reply'; n: number; v?: unknown; e?: WireError };

/**
 * Child to parent. Once at its start, `ready` (the processor module loaded) or `load` (it failed to:
 * the child is then useless, and answers every run with `load` again).
 */
export type ToParent =
  | { t: 'ready' }
  | { t: 'done'; v?: unknown; e?: WireError }
  | { t: 'call'; n: number; r: number; op: SandboxCall; args: unknown[] }
  | { t: 'load'; e: WireError };

export function errorToWire(err: unknown): WireError {
  if (err instanceof Error) {
    return { name: err.name, message: err.message, stack: err.stack, ...(isUnrecoverable(err) ? { unrecoverable: true } : {}) };
  }
  return { name: 'Error', message: String(err) };
}

/** The error again, of the class that decides what happens to the job (no retry, rate limited). */
export function errorFromWire(w: WireError): Error {
  const err = w.unrecoverable ? new UnrecoverableError(w.message) : w.name === 'RateLimitError' ? new RateLimitError(w.message) : new Error(w.message);
  err.name = w.name;
  if (w.stack) err.stack = w.stack;
  return err;
}
