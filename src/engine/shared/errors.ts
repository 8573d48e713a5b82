/**
 * One table maps the coded errors that the Lua library returns (`ERR_JOB_NOT_FOUND job 42 ...`)
 * to typed errors, so callers can branch on the class and users read the server's own sentence.
 */
export class GlideMQError extends Error {
  /** The coded prefix (e.g. `ERR_JOB_NOT_FOUND`), or a client-side code. */
  readonly code: string;
  /** True when the error comes from bad input (the CLI exits 2 and prints one line). */
  readonly usage: boolean;
  constructor(code: string, message: string, usage = false) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.usage = usage;
  }
}

export class JobNotFoundError extends GlideMQError {}
export class StaleClaimError extends GlideMQError {}
export class InvalidArgumentError extends GlideMQError {}
export class PayloadTooLargeError extends GlideMQError {}
/** A library function failed in a way it does not expect (a bug): the message says where. */
export class InternalError extends GlideMQError {}
export class LibraryVersionError extends GlideMQError {}
export class ConnectionError extends GlideMQError {}
export class WrongTypeError extends GlideMQError {}
export class JobActiveError extends GlideMQError {}
/** A job is not in the state an operation needs (retry of a job that has not finished, promote or
 * changeDelay of a job that is not delayed): the message names the job, its state and the call. */
export class JobStateError extends GlideMQError {}
export class SubscriptionNotFoundError extends GlideMQError {}
/** A BullMQ option or call glidemq does not support (code ERR_NOT_SUPPORTED): the message names
 * it, why, and what to do instead. Thrown on this side, before anything is written. */
export class NotSupportedError extends GlideMQError {}
/** Thrown by a processor to fail the job at once, without further attempts. */
const UNRECOVERABLE = Symbol.for('glidemq.unrecoverable');

/** Thrown by a processor: the job fails at once, with no retry left. */
export class UnrecoverableError extends Error {
  override name = 'UnrecoverableError';
  /** A brand, not `instanceof`: the CLI runs from a bundle with its own copy of this class, while
   * a processor script imports the package's. */
  readonly [UNRECOVERABLE] = true;
}

/**
 * Thrown by a processor after it parked its job (job.moveToDelayed): the worker stores no outcome
 * for the run (BullMQ's name; glidemq also knows a parked job without it).
 */
export class DelayedError extends Error {
  override name = 'DelayedError';
}

/**
 * Thrown by a processor after job.moveToWaitingChildren(token) answered true: the job waits for its
 * children, and the worker stores no outcome for the run (BullMQ's name; the job is parked either way).
 */
export class WaitingChildrenError extends Error {
  override name = 'WaitingChildrenError';
}

/**
 * Thrown by a processor after worker.rateLimit(ms): the job goes back to waiting without counting
 * an attempt, and the queue takes no job until the limit has passed.
 */
export class RateLimitError extends Error {
  override name = 'RateLimitError';
  constructor(message = 'rate limit exceeded') {
    super(message);
  }
}

/** The brand of a BatchError (as UnrecoverableError's: a bundle may hold its own copy of the class). */
const BATCH_RESULTS = Symbol.for('glidemq.batchResults');

/**
 * Thrown by a batch processor (the Worker's `batch` option) to report each job's own outcome:
 * `results` holds one entry per job of the batch, in order; an entry that is an Error fails that
 * job (it then retries or fails for good by its own rules), any other entry completes it with that
 * value.
 */
export class BatchError extends Error {
  override name = 'BatchError';
  readonly [BATCH_RESULTS] = true;
  constructor(readonly results: unknown[]) {
    const failed = Array.isArray(results) ? results.filter((r) => r instanceof Error).length : 0;
    super(`the batch processor reported ${failed} of ${Array.isArray(results) ? results.length : 0} jobs failed`);
  }
}

export function isBatchError(err: unknown): err is BatchError {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[BATCH_RESULTS] === true;
}

export function isUnrecoverable(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[UNRECOVERABLE] === true;
}

type ErrorClass = new (code: string, message: string, usage?: boolean) => GlideMQError;

/**
 * Coded Lua error prefix → TypeScript error class, and whether it is the caller's bad input.
 * Exactly the codes lua/ emits (test/unit/lua-contract checks both directions); client-side codes
 * such as ERR_STALE_CLAIM or ERR_LIBRARY_NEWER are thrown where they arise, not mapped here.
 */
export const LUA_ERRORS: Record<string, [ErrorClass, boolean]> = {
  ERR_JOB_NOT_FOUND: [JobNotFoundError, true],
  ERR_INVALID: [InvalidArgumentError, true],
  ERR_TOO_LARGE: [PayloadTooLargeError, true],
  ERR_WRONG_TYPE: [WrongTypeError, true],
  ERR_JOB_ACTIVE: [JobActiveError, true],
  ERR_JOB_STATE: [JobStateError, true],
  ERR_NO_SUBSCRIPTION: [SubscriptionNotFoundError, true],
  ERR_INTERNAL: [InternalError, false],
};

/** Turns a raw server error into the typed error its code names; other errors pass through. */
export function fromServerError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const match = /^(ERR_[A-Z_]+)\s+(.*)$/s.exec(err.message);
  if (match) {
    const entry = LUA_ERRORS[match[1]];
    if (entry) {
      const [Cls, usage] = entry;
      return new Cls(match[1], match[2], usage);
    }
  }
  if (/^WRONGTYPE/.test(err.message)) {
    return new WrongTypeError(
      'ERR_WRONG_TYPE',
      `a key has the wrong type for glidemq (${err.message}); another program wrote to a glidemq key`,
      true,
    );
  }
  return err;
}

/** A key of a queue holds another program's data, of another type than glidemq keeps there. */
export function wrongTypeError(key: string, actual: string, expected: string): WrongTypeError {
  return new WrongTypeError(
    'ERR_WRONG_TYPE',
    `key ${key} holds a ${actual}, where glidemq keeps a ${expected}: another program wrote to it (rename or delete the key)`,
    true,
  );
}

export function invalid(message: string): InvalidArgumentError {
  return new InvalidArgumentError('ERR_INVALID', message, true);
}

/**
 * A confirmed write (README "Confirmed writes") was made, but WAITAOF / WAIT did not confirm it
 * within its timeout: `reached` says how far it got ("fsynced locally, on 0 of 1 replicas").
 * Retrying is safe: adds are once-only; `retry()` (when given) re-sends the very same call and
 * confirms again.
 */
export class ConfirmTimeoutError extends GlideMQError {
  constructor(
    message: string,
    readonly reached: string,
    readonly retry?: () => Promise<unknown>,
  ) {
    super('ERR_CONFIRM_TIMEOUT', message);
  }
}
