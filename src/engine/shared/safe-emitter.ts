/**
 * The base of every engine class that emits events to application code (Worker, BroadcastWorker,
 * Queue, Broadcast). A listener belongs to the application, not to glidemq: whatever it throws
 * (or an async listener rejects with) must not unwind into the code that emitted the event, where
 * it would leave a job active forever, drop the jobs a finish call handed back, or stop a read
 * loop. So emit() runs each listener on its own: a throw becomes one `error` event (a
 * ListenerError naming the event, the thrown value as its cause), the other listeners of the event
 * still run, and the caller carries on as if the listeners had returned.
 *
 * An `error` event nobody listens to, or an `error` listener that throws itself, is reported with
 * process.emitWarning: never an uncaught exception or an unhandled rejection.
 */
import { EventEmitter } from 'node:events';
import { GlideMQError } from './errors.js';

/** What an event listener threw: emitted as `error`; `cause` is the thrown value. */
export class ListenerError extends GlideMQError {
  constructor(
    /** The event whose listener threw. */
    readonly event: string,
    cause: unknown,
  ) {
    super('ERR_LISTENER', `a listener for the '${event}' event threw: ${describe(cause)}`);
    (this as { cause?: unknown }).cause = cause;
  }
}

type Listener = (...args: unknown[]) => unknown;

export class SafeEmitter extends EventEmitter {
  override emit(event: string | symbol, ...args: any[]): boolean {
    if (event === 'error') return this.deliverError(args);
    // an event nobody listens to (a worker's 'active' often) costs no copy of its listeners and no closure
    if (this.listenerCount(event) === 0) return false;
    return this.runListeners(event, args);
  }

  /**
   * Calls each listener of `event` on its own; `threw` gets what one throws or rejects with (none:
   * it is emitted as `error`, a ListenerError naming the event). The array is a copy (as
   * EventEmitter itself takes): a listener that adds or removes listeners, or a once() listener
   * removing itself, does not change who runs this time.
   */
  private runListeners(event: string | symbol, args: unknown[], threw?: (err: unknown) => void): boolean {
    const listeners = this.rawListeners(event) as Listener[];
    const n = listeners.length;
    if (n === 0) return false;
    for (let i = 0; i < n; i++) {
      try {
        const result = listeners[i].apply(this, args);
        // an async listener: its rejection is caught the same way, later
        if (result !== undefined && result !== null && typeof (result as PromiseLike<unknown>).then === 'function') {
          (result as PromiseLike<unknown>).then(undefined, threw ?? ((err) => this.listenerThrew(event, err)));
        }
      } catch (err) {
        if (threw) threw(err);
        else this.listenerThrew(event, err);
      }
    }
    return true;
  }

  /** What a listener of `event` (not `error`) threw or rejected with, emitted as `error`. */
  private listenerThrew(event: string | symbol, err: unknown): void {
    this.deliverError([new ListenerError(String(event), err)]);
  }

  /** `error` listeners run one by one too; none, or one that throws, ends in a warning. */
  private deliverError(args: unknown[]): boolean {
    if (this.listenerCount(EventEmitter.errorMonitor) > 0) {
      this.runListeners(EventEmitter.errorMonitor, args, (err) => warn(err, `an errorMonitor listener of ${this.constructor.name} threw`));
    }
    const ran = this.runListeners('error', args, (err) => warn(err, `an 'error' listener of ${this.constructor.name} threw`));
    if (!ran) warn(args[0], `${this.constructor.name} emitted an error with no 'error' listener`);
    return ran;
  }
}

function warn(err: unknown, context: string): void {
  try {
    process.emitWarning(`${context}: ${describe(err)}`, { code: 'GLIDEMQ_UNHANDLED_ERROR', detail: err instanceof Error ? err.stack : undefined });
  } catch {
    /* a warning that cannot be printed is not worth a crash */
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  try {
    return String(err);
  } catch {
    return 'an unprintable value';
  }
}
