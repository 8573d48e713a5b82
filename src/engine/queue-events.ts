/**
 * QueueEvents: a queue's events, as BullMQ's QueueEvents gives them (the same names and argument
 * shapes, `(args, id)` with `id` the event's stream entry id), read from the queue's events stream
 * (`<prefix>:{<queue>}:events`, lua/helpers.lua emit) with a blocking XREAD on a connection of its
 * own. job.waitUntilFinished(queueEvents) waits through it.
 *
 * What is written when (lua/events.lua): the events of the per-job path (`active`, `completed`
 * with its return value, `retries-exhausted`, `drained`) cost the server an XADD per job, so they
 * are written only while a QueueEvents listens: each one registers its presence in the queue's
 * meta (`eventsUntil`, on the server's clock) when it starts and every third of `presenceTtl`
 * after, and those events stop at most `presenceTtl` ms after the last one closed. A QueueEvents
 * reading from '$' (the default) so sees every event written after it started. One started with
 * an older `lastEventId` also reads what was written before it, where those events are only the
 * ones written while some other QueueEvents listened. Every other event (`failed`, `progress`,
 * `stalled`, `added`, `paused`, ...) is written whether anyone listens or not.
 *
 * The stream keeps about the last 1000 events (as BullMQ's default): a QueueEvents that falls
 * further behind misses the oldest. A listener belongs to the application: what it throws
 * becomes an `error` event (SafeEmitter) and the read loop goes on. A broken connection is
 * reconnected and the read resumes after the last event it delivered; after a reconnect (or a
 * lapse of the presence) every job.waitUntilFinished re-reads its job's stored state, so an
 * outcome whose event was never written (the server restarted, its data lost) is not waited for
 * in vain.
 */
import type { Redis } from 'ioredis';
import { RetryWait } from './waiting.js';
import {
  acquireClient, closeClient, disconnectClient, duplicateClient, settleTopology, socketTimeoutOf, type Acquired, type Client, type ConnectionInput,
} from './connection.js';
import { GlideMQError, JobNotFoundError, invalid } from './errors.js';
import { DEFAULT_PREFIX, QueueKeys } from './keys.js';
import { callFunction, ensureLibrary } from './library.js';
import { ListenerError, SafeEmitter } from './safe-emitter.js';

export interface QueueEventsOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** Start reading at once (default true); with false, call run(). */
  autorun?: boolean;
  /** Read the events after this stream id (default '$': the events written from now on). */
  lastEventId?: string;
  /** Longest wait of one blocking XREAD, ms (default 10000). */
  blockingTimeout?: number;
  /**
   * glidemq: how long the presence this QueueEvents registers lasts, ms (default 30000, from 1000
   * to 86400000); it is renewed every third of it. The per-job events go on at most this long
   * after the last QueueEvents of the queue closed (see the module comment).
   */
  presenceTtl?: number;
  /**
   * glidemq: register the presence only while the queue exists (its meta hash is there), so that
   * listening to a queue nothing used does not make it; a renewal registers once it is there.
   * Default false: the presence is registered at once (`glidemq events --follow` sets it).
   */
  presenceIfExists?: boolean;
  /**
   * glidemq: every stream entry as it is stored (its id, then field, value, ... as lua/helpers.lua
   * emit writes them: `event`, `jobId`, the event's own fields), in order, before it is turned into
   * the events below. For a reader of the log itself (EventLog); what it throws becomes an `error`
   * event (a ListenerError for 'entry') and the read goes on.
   */
  onEntry?: (id: string, fields: string[]) => void;
  /** glidemq: the blocking read's connection was lost ('lost': it reconnects on its own), or is back ('back'). */
  onConnection?: (state: 'lost' | 'back') => void;
}

/** The events and their arguments (BullMQ's QueueEventsListener, plus glidemq's `retrying` and `debounced`). */
export interface QueueEventsListener<R = any> {
  /** A job was claimed by a worker (written only while a QueueEvents listens). */
  active: (args: { jobId: string; prev?: string }, id: string) => void;
  added: (args: { jobId: string; name: string }, id: string) => void;
  cleaned: (args: { count: string }, id: string) => void;
  /** `returnvalue` is parsed from its JSON; undefined for an event written while no QueueEvents listened. */
  completed: (args: { jobId: string; returnvalue: R; prev?: string }, id: string) => void;
  /** An add named the custom jobId of an existing job and was ignored. */
  duplicated: (args: { jobId: string }, id: string) => void;
  /** An add with `deduplicationId` was folded into job `jobId` (no new job was created);
   * `deduplicatedJobId` is the id that add took (its custom jobId, or one from the counter). */
  deduplicated: (args: { jobId: string; deduplicationId: string; deduplicatedJobId: string }, id: string) => void;
  /** glidemq's debounce mode: the waiting delayed job `jobId` took a later add's data and delay. */
  debounced: (args: { jobId: string; debounceId: string }, id: string) => void;
  /** `delay` is when the job is due: ms since the epoch, on the server's clock. */
  delayed: (args: { jobId: string; delay: number }, id: string) => void;
  drained: (id: string) => void;
  error: (err: Error) => void;
  failed: (args: { jobId: string; failedReason: string; prev?: string }, id: string) => void;
  paused: (args: object, id: string) => void;
  progress: (args: { jobId: string; data: unknown }, id: string) => void;
  removed: (args: { jobId: string; prev?: string }, id: string) => void;
  resumed: (args: object, id: string) => void;
  'retries-exhausted': (args: { jobId: string; attemptsMade: string }, id: string) => void;
  /** glidemq: an attempt failed and the job will run again (then `waiting`, or `delayed` after a backoff). */
  retrying: (args: { jobId: string; failedReason: string }, id: string) => void;
  stalled: (args: { jobId: string }, id: string) => void;
  waiting: (args: { jobId: string; prev?: string }, id: string) => void;
}

type EventName<R> = keyof QueueEventsListener<R>;

export const DEFAULT_BLOCKING_TIMEOUT = 10_000;
export const DEFAULT_PRESENCE_TTL = 30_000;
/** Entries taken per XREAD. */
const READ_COUNT = 200;

/** A job.waitUntilFinished in progress. */
interface Waiter {
  jobId: string;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  timer?: NodeJS.Timeout;
  done: boolean;
}

/** Something to run once the reader has delivered every event up to `tail`. */
interface CatchUp {
  tail: string;
  /** The number of the read that was the latest to start when this was registered. */
  read: number;
  run: () => void;
}

/** Typed on/once/off for the events above (the class itself is an ordinary EventEmitter). */
export interface QueueEvents<R = any> {
  on<U extends EventName<R>>(event: U, listener: QueueEventsListener<R>[U]): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once<U extends EventName<R>>(event: U, listener: QueueEventsListener<R>[U]): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  off<U extends EventName<R>>(event: U, listener: QueueEventsListener<R>[U]): this;
  off(event: string | symbol, listener: (...args: any[]) => void): this;
}

export class QueueEvents<R = any> extends SafeEmitter {
  readonly keys: QueueKeys;
  private readonly acquired: Acquired;
  private readonly blockingTimeout: number;
  private readonly presenceTtl: number;
  private readonly presenceIfExists: boolean;
  private readonly onEntry: ((id: string, fields: string[]) => void) | undefined;
  private readonly onConnection: ((state: 'lost' | 'back') => void) | undefined;
  /** The connection that blocks; made by run(). */
  private blocker: Client | undefined;
  /** Where the next read starts: the id of the last event delivered (or the start id). */
  private position: string;
  private running = false;
  private closing: Promise<void> | undefined;
  private loopDone: Promise<void> | undefined;
  private presenceTimer: NodeJS.Timeout | undefined;
  /** The read loop's back-off after a failed read (close() ends it). */
  private readonly retry = new RetryWait();
  private reads = 0;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private catchUps: CatchUp[] = [];
  private ready: Promise<void> | undefined;
  private started!: Promise<void>;
  private markStarted!: () => void;
  private failStarted!: (err: unknown) => void;

  constructor(
    readonly name: string,
    opts: QueueEventsOptions = {},
  ) {
    super();
    this.keys = new QueueKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    this.blockingTimeout = wholeMs(opts.blockingTimeout, DEFAULT_BLOCKING_TIMEOUT, 1, 'blockingTimeout');
    this.presenceTtl = wholeMs(opts.presenceTtl, DEFAULT_PRESENCE_TTL, 1000, 'presenceTtl', 86_400_000);
    this.presenceIfExists = opts.presenceIfExists === true;
    this.onEntry = opts.onEntry;
    this.onConnection = opts.onConnection;
    const last = opts.lastEventId ?? '$';
    if (typeof last !== 'string' || !/^(\$|\d+(-\d+)?)$/.test(last)) {
      throw invalid(`QueueEvents lastEventId must be '$' or a stream id such as '0' or '1700000000000-0', got ${JSON.stringify(last)}`);
    }
    this.position = last;
    this.acquired = acquireClient(opts.connection);
    this.resetStarted();
    if (opts.autorun !== false) {
      this.run().catch((err) => {
        if (!this.closing) this.emitError(err);
      });
    }
  }

  /** The command connection (a Cluster client once the server turned out to be a cluster node). */
  get client(): Client {
    return this.acquired.client;
  }

  private resetStarted(): void {
    this.started = new Promise<void>((resolve, reject) => {
      this.markStarted = resolve;
      this.failStarted = reject;
    });
    this.started.catch(() => undefined);
  }

  /**
   * Resolves once the QueueEvents reads: its presence is registered and every event written from
   * then on will be delivered. Before run() (autorun false): once the connection is up and the
   * library loaded.
   */
  waitUntilReady(): Promise<void> {
    if (this.running) return this.started;
    return this.connect();
  }

  /** The connection settled (cluster or not) and the library ensured on it. */
  private connect(): Promise<void> {
    if (!this.ready) {
      const ready = settleTopology(this.acquired).then((c) => ensureLibrary(c));
      ready.catch(() => {
        if (this.ready === ready) this.ready = undefined;
      });
      this.ready = ready;
    }
    return this.ready;
  }

  /**
   * Starts reading (autorun does it in the constructor). As BullMQ's, the promise resolves when
   * the QueueEvents is closed, and a second call while it runs rejects.
   */
  run(): Promise<void> {
    if (this.closing) return Promise.reject(new Error(`the QueueEvents of queue ${this.name} is closed`));
    if (this.running) return Promise.reject(new Error(`the QueueEvents of queue ${this.name} is already running (autorun starts it in the constructor)`));
    this.running = true;
    this.loopDone = this.consume();
    return this.loopDone;
  }

  private async consume(): Promise<void> {
    try {
      await this.connect();
      const tail = await this.announce(true);
      if (this.position === '$') this.position = tail;
      if (this.closing) {
        // closed while starting: nothing more to make (or to leak)
        this.failStarted(new GlideMQError('ERR_CLOSED', `the QueueEvents of queue ${this.name} was closed while it started`));
        return;
      }
      this.blocker = duplicateClient(this.acquired, {
        maxRetriesPerRequest: null,
        // a blocking read is silent for up to blockingTimeout by design
        socketTimeout: this.blockingTimeout + socketTimeoutOf(this.acquired),
      });
      if (this.onConnection) this.watchBlocker(this.blocker, this.onConnection);
      this.presenceTimer = setInterval(() => void this.renew(), Math.floor(this.presenceTtl / 3));
      this.client.on('ready', this.onReconnect);
    } catch (err) {
      this.running = false;
      this.failStarted(err);
      this.resetStarted();
      throw err;
    }
    this.markStarted();
    await this.readLoop();
  }

  /**
   * Registers (or renews) this QueueEvents' presence; the id of the newest event. `first`: the
   * start (a lapse before it is not this reader's loss); later, a lapse means per-job events may
   * have gone unwritten, so every waiter re-reads its job.
   */
  private async announce(first = false): Promise<string> {
    const { last, lapsed } = await listenEvents(this.client, this.keys, this.presenceTtl, this.presenceIfExists);
    if (!first && lapsed) this.recheckAll();
    return last;
  }

  /** Tells onConnection when the blocking connection drops and when it is back (once each). */
  private watchBlocker(blocker: Client, onConnection: (state: 'lost' | 'back') => void): void {
    let lost = false;
    (blocker as Redis).on('close', () => {
      if (!lost && !this.closing) onConnection('lost');
      lost = true;
    });
    (blocker as Redis).on('ready', () => {
      if (lost && !this.closing) onConnection('back');
      lost = false;
    });
  }

  private async renew(): Promise<void> {
    if (this.closing) return;
    try {
      await this.announce();
    } catch (err) {
      // while the connection is down the reconnect renews it; anything else is news
      if (!this.closing && this.client.status === 'ready') this.emitError(err);
    }
  }

  /** The command connection is back: renew the presence at once, and have every waiter look again. */
  private readonly onReconnect = (): void => {
    void this.renew().then(() => this.recheckAll());
  };

  private async readLoop(): Promise<void> {
    while (!this.closing) {
      const read = ++this.reads;
      let reply: [string, [string, string[]][]][] | null;
      try {
        reply = (await (this.blocker as Redis).xread(
          'COUNT', READ_COUNT, 'BLOCK', this.blockingTimeout, 'STREAMS', this.keys.events, this.position,
        )) as [string, [string, string[]][]][] | null;
        this.retry.reset();
      } catch (err) {
        if (this.closing) break;
        this.emitError(err);
        await this.retry.next();
        continue;
      }
      if (this.closing) break;
      const entries = reply?.[0]?.[1] ?? [];
      if (entries.length > 0) await this.deliver(entries);
      this.caughtUp(entries.length === 0 ? read : undefined);
    }
  }

  /** Turns stream entries into events, in order (one pipelined lookup for `added` events that need one). */
  private async deliver(entries: [string, string[]][]): Promise<void> {
    const raws = entries.map(([id, fields]) => ({ id, fields, f: record(fields) }));
    const lookups = await this.lookupAdded(raws);
    for (const raw of raws) {
      this.position = raw.id;
      if (this.onEntry) this.handOver(this.onEntry, raw.id, raw.fields);
      this.settleWaiters(raw.f);
      this.translate(raw.id, raw.f, lookups.get(raw.id));
    }
  }

  /** onEntry is the application's, as a listener is: what it throws must not stop the read. */
  private handOver(onEntry: (id: string, fields: string[]) => void, id: string, fields: string[]): void {
    try {
      onEntry(id, fields);
    } catch (err) {
      this.emit('error', new ListenerError('entry', err));
    }
  }

  /**
   * An `added` event names the job only; BullMQ's `added` carries its name and is followed by
   * `waiting` or `delayed`. Those are read from the job's hash when someone listens for them (a
   * job already gone reads as waiting with no name; one promoted since reads as waiting).
   */
  private async lookupAdded(raws: { id: string; f: Record<string, string> }[]): Promise<Map<string, (string | null)[]>> {
    const out = new Map<string, (string | null)[]>();
    const wanted = raws.filter((r) => r.f.event === 'added' && r.f.name === undefined && r.f.jobId);
    if (wanted.length === 0) return out;
    if (this.listenerCount('added') + this.listenerCount('waiting') + this.listenerCount('delayed') === 0) return out;
    try {
      const p = this.client.pipeline();
      for (const r of wanted) p.hmget(this.keys.job(r.f.jobId), 'name', 'state', 'ts', 'delay');
      const res = (await p.exec()) ?? [];
      res.forEach(([err, v], i) => {
        if (!err) out.set(wanted[i].id, v as (string | null)[]);
      });
    } catch {
      /* reconnecting: the events go out with what the stream says */
    }
    return out;
  }

  /** Emits the BullMQ event(s) one stream entry stands for. */
  private translate(id: string, f: Record<string, string>, looked: (string | null)[] | undefined): void {
    const jobId = f.jobId ?? '';
    switch (f.event) {
      case 'added': {
        this.emit('added', { jobId, name: f.name ?? looked?.[0] ?? '' }, id);
        // the due time: the job's own ts + delay while its hash is there; the entry's time once it is gone
        const added = looked?.[2] ? Number(looked[2]) : entryMs(id);
        const delay = f.delay !== undefined ? added + Number(f.delay) : looked?.[1] === 'delayed' ? Number(looked[2]) + Number(looked[3]) : NaN;
        if (Number.isFinite(delay)) this.emit('delayed', { jobId, delay }, id);
        else this.emit('waiting', { jobId }, id);
        return;
      }
      case 'waiting':
        // a step job parked with no delay (lua/step.lua)
        this.emit('waiting', { jobId, prev: f.prev ?? 'active' }, id);
        return;
      case 'delayed':
        // lua/step.lua writes the delay from the server's now: made absolute by the entry's time
        this.emit('delayed', { jobId, delay: entryMs(id) + Number(f.delay ?? 0) }, id);
        return;
      case 'active':
        this.emit('active', { jobId, prev: f.prev ?? 'waiting' }, id);
        return;
      case 'progress':
        this.emit('progress', { jobId, data: parse(f.data) }, id);
        return;
      case 'completed':
        this.emit('completed', { jobId, returnvalue: f.returnvalue === undefined ? undefined : parse(f.returnvalue), prev: 'active' }, id);
        return;
      case 'failed':
        this.emit('failed', { jobId, failedReason: f.reason ?? f.failedReason ?? '', prev: 'active' }, id);
        return;
      case 'retries-exhausted':
        this.emit('retries-exhausted', { jobId, attemptsMade: f.attemptsMade ?? '' }, id);
        return;
      case 'retrying': {
        // lua/finish.lua: a failed attempt with attempts left, run again at once or after `delay`
        this.emit('retrying', { jobId, failedReason: f.reason ?? '' }, id);
        if (f.delay !== undefined) this.emit('delayed', { jobId, delay: entryMs(id) + Number(f.delay) }, id);
        else this.emit('waiting', { jobId, prev: 'active' }, id);
        return;
      }
      case 'stalled':
        this.emit('stalled', { jobId }, id);
        return;
      case 'removed':
        this.emit('removed', { jobId, prev: f.prev }, id);
        return;
      case 'duplicated':
        this.emit('duplicated', { jobId }, id);
        return;
      // (dedupId: the field's name in entries written before BullMQ's names were used)
      case 'deduplicated':
        this.emit('deduplicated', dedupArgs(jobId, f), id);
        return;
      case 'debounced': {
        const args = dedupArgs(jobId, f);
        this.emit('deduplicated', args, id);
        this.emit('debounced', { jobId, debounceId: args.deduplicationId }, id);
        return;
      }
      case 'drained':
        this.emit('drained', id);
        return;
      case 'paused':
      case 'resumed':
        this.emit(f.event, {}, id);
        return;
      case 'cleaned':
        this.emit('cleaned', { count: f.count ?? '0' }, id);
        return;
      default: {
        // an event this version does not know (or 'skipped'): its fields as they are
        if (!f.event || f.event === 'error') return;
        const { event, ...args } = f;
        this.emit(event, args, id);
      }
    }
  }

  /** Runs what waited for the reader to pass its tail; `timedOut`: the read of that number found nothing new. */
  private caughtUp(timedOut: number | undefined): void {
    if (this.catchUps.length === 0) return;
    const due: CatchUp[] = [];
    this.catchUps = this.catchUps.filter((c) => {
      const ok = (timedOut !== undefined && c.read < timedOut) || compareIds(this.position, c.tail) >= 0;
      if (ok) due.push(c);
      return !ok;
    });
    for (const c of due) c.run();
  }

  // ------------------------------------------------------------------ waitUntilFinished

  /**
   * What job.waitUntilFinished(this, ttl) returns: the job's return value once it completed, or a
   * rejection with an Error whose message is its failedReason; a job that already finished answers
   * from its stored state. `ttl` (ms, optional) bounds the wait. A job that does not exist (or was
   * removed before it finished) rejects with a JobNotFoundError; close() rejects what still waits.
   */
  untilFinished(jobId: string, ttl?: number): Promise<unknown> {
    if (ttl !== undefined && ttl !== 0 && !(Number.isFinite(ttl) && ttl > 0)) {
      return Promise.reject(invalid(`waitUntilFinished: ttl must be a number of ms > 0, got ${String(ttl)}`));
    }
    if (this.closing) return Promise.reject(closedError(this.name, jobId));
    return new Promise((resolve, reject) => {
      const w: Waiter = { jobId, resolve, reject, done: false };
      let set = this.waiters.get(jobId);
      if (!set) this.waiters.set(jobId, (set = new Set()));
      set.add(w);
      if (ttl) {
        w.timer = setTimeout(() => {
          this.settle(w, undefined, new GlideMQError('ERR_TIMEOUT', `job ${jobId} did not finish within ${ttl} ms (waitUntilFinished ttl)`));
        }, ttl);
      }
      // registered before the stored state is read, so an outcome is either stored by then or its
      // event comes after; a start that failed is waited out until the next run() starts
      const afterStart = (): void => {
        this.started.then(() => this.check(w), () => {
          if (!w.done && !this.closing) afterStart();
        });
      };
      afterStart();
    });
  }

  private settle(w: Waiter, value: unknown, err?: unknown): void {
    if (w.done) return;
    w.done = true;
    clearTimeout(w.timer);
    const set = this.waiters.get(w.jobId);
    set?.delete(w);
    if (set && set.size === 0) this.waiters.delete(w.jobId);
    if (err !== undefined) w.reject(err);
    else w.resolve(value);
  }

  /**
   * Reads the job's stored outcome, then the newest event id, in one pipeline: a finished job
   * settles the wait; a missing one does once the reader has delivered every event up to that id
   * (the outcome of a job removed on completion was written before the hash was gone, so before
   * that id). No MULTI: the order is enough, and the documented ACL rules allow no MULTI/EXEC.
   */
  private async check(w: Waiter): Promise<void> {
    if (w.done) return;
    let res: [Error | null, unknown][] | null;
    try {
      res = await this.client
        .pipeline()
        .hmget(this.keys.job(w.jobId), 'state', 'returnvalue', 'failedReason')
        .xrevrange(this.keys.events, '+', '-', 'COUNT', 1)
        .exec();
    } catch {
      return; // reconnecting: every waiter looks again once the connection is back
    }
    if (!res || w.done) return;
    const [[jobErr, fields], [, last]] = res as [[Error | null, (string | null)[]], [Error | null, [string, string[]][] | null]];
    if (jobErr) return this.settle(w, undefined, jobErr);
    const [state, returnvalue, failedReason] = fields;
    if (state === 'completed') return this.settle(w, returnvalue === null ? null : parse(returnvalue));
    if (state === 'failed') return this.settle(w, undefined, new Error(failedReason ?? 'failed'));
    if (state !== null) return; // not finished: its event will come
    const tail = last?.[0]?.[0] ?? '0-0';
    this.afterCaughtUp(tail, () => this.settle(w, undefined, missingError(w.jobId)));
  }

  private afterCaughtUp(tail: string, run: () => void): void {
    if (compareIds(this.position, tail) >= 0) return run();
    this.catchUps.push({ tail, read: this.reads, run });
  }

  /** A stream entry that finishes (or removes) a job some waiter waits for. */
  private settleWaiters(f: Record<string, string>): void {
    if (this.waiters.size === 0 || !f.jobId) return;
    const set = this.waiters.get(f.jobId);
    if (!set) return;
    for (const w of [...set]) {
      if (f.event === 'completed') {
        if (f.returnvalue !== undefined) this.settle(w, parse(f.returnvalue));
        else void this.readReturnValue(w);
      } else if (f.event === 'failed') {
        this.settle(w, undefined, new Error(f.reason ?? f.failedReason ?? 'failed'));
      } else if (f.event === 'removed') {
        this.settle(w, undefined, missingError(w.jobId, 'was removed before it finished'));
      }
    }
  }

  /** A `completed` written without its value (no QueueEvents listened then): the stored one. */
  private async readReturnValue(w: Waiter): Promise<void> {
    try {
      const v = await this.client.hget(this.keys.job(w.jobId), 'returnvalue');
      this.settle(w, v === null ? null : parse(v));
    } catch {
      /* reconnecting: looked at again then */
    }
  }

  private recheckAll(): void {
    for (const set of this.waiters.values()) for (const w of set) void this.check(w);
  }

  // ------------------------------------------------------------------ closing

  /** Stops reading, rejects what still waits for a job, and closes the connections it made. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.presenceTimer);
      this.client.off('ready', this.onReconnect);
      this.retry.wake();
      // a read in progress ends with the connection; nothing is sent on it again
      if (this.blocker) disconnectClient(this.blocker);
      await this.loopDone?.catch(() => undefined);
      // again: a start that was under way made them after the lines above ran
      clearInterval(this.presenceTimer);
      if (this.blocker) disconnectClient(this.blocker);
      for (const set of [...this.waiters.values()]) for (const w of [...set]) this.settle(w, undefined, closedError(this.name, w.jobId));
      this.catchUps = [];
      await this.ready?.catch(() => undefined); // a Cluster client being set up is closed too
      if (this.acquired.owned) await closeClient(this.client);
    })();
    return this.closing;
  }

  /** BullMQ's disconnect(): the same as close() here. */
  disconnect(): Promise<void> {
    return this.close();
  }

  private emitError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}

function wholeMs(v: number | undefined, fallback: number, min: number, what: string, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined) return fallback;
  if (!Number.isFinite(v) || v < min || v > max) throw invalid(`QueueEvents ${what} must be a number of ms from ${min} to ${max}, got ${String(v)}`);
  return Math.floor(v);
}

function record(fields: string[]): Record<string, string> {
  const r: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) r[fields[i]] = fields[i + 1];
  return r;
}

/** JSON text as its value; text that is not JSON as it is. */
function parse(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The server time (ms) a stream entry id was made at. */
/** A dedup event's arguments, BullMQ's names, from its entry's fields (lua/dedup.lua applyDedup). */
function dedupArgs(jobId: string, f: Record<string, string>): { jobId: string; deduplicationId: string; deduplicatedJobId: string } {
  return { jobId, deduplicationId: f.deduplicationId ?? f.dedupId ?? '', deduplicatedJobId: f.deduplicatedJobId ?? '' };
}

function entryMs(id: string): number {
  return Number(id.split('-')[0]);
}

/**
 * glidemq_listenEvents (lua/events.lua) on `client`: registers (renews) a reader's presence for
 * `ttl` ms; `last` is the id of the newest event ('0-0': none), `lapsed` whether no reader was
 * present right before. `ifExists`: only on a queue that exists, since the presence is a field of
 * its meta hash and listening to a queue nothing used must not make it (an obliterate in the
 * instant between the two calls would leave the meta hash behind); otherwise only the newest id.
 */
export async function listenEvents(client: Client, keys: QueueKeys, ttl: number, ifExists = false): Promise<{ last: string; lapsed: boolean }> {
  if (ifExists && (await client.exists(keys.meta)) !== 1) {
    const newest = (await client.xrevrange(keys.events, '+', '-', 'COUNT', 1)) as [string, string[]][];
    return { last: newest[0]?.[0] ?? '0-0', lapsed: false };
  }
  const r = (await callFunction(client, 'glidemq_listenEvents', keys.meta, [ttl])) as [string, number];
  return { last: String(r[0]), lapsed: Number(r[1]) === 1 };
}

/** Orders two stream ids (`<ms>-<seq>`, the seq optional). */
export function compareIds(a: string, b: string): number {
  if (a === '$' || b === '$') return a === b ? 0 : a === '$' ? 1 : -1;
  const [am, as = '0'] = a.split('-');
  const [bm, bs = '0'] = b.split('-');
  const ms = BigInt(am) - BigInt(bm);
  if (ms !== 0n) return ms < 0n ? -1 : 1;
  const seq = BigInt(as) - BigInt(bs);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}

function missingError(jobId: string, what = 'does not exist (removed, or removed on completion before its outcome could be read)'): JobNotFoundError {
  return new JobNotFoundError('ERR_JOB_NOT_FOUND', `job ${jobId} ${what}: waitUntilFinished cannot tell its outcome`);
}

function closedError(queue: string, jobId: string): GlideMQError {
  return new GlideMQError('ERR_CLOSED', `the QueueEvents of queue ${queue} was closed while job ${jobId} had not finished (waitUntilFinished)`);
}
