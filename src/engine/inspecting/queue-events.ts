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
 *
 * This file reads (the connection, the presence, the read loop) and hands each entry on. Its
 * parts: event-translation.ts turns an entry into BullMQ's events, finish-waiters.ts settles
 * job.waitUntilFinished, event-stream.ts holds what EventLog shares (listenEvents, compareIds).
 */
import type { Redis } from 'ioredis';
import { RetryWait } from '../shared/waiting.js';
import {
  acquireClient, closeClient, disconnectClient, duplicateClient, socketTimeoutOf, type Acquired, type Client, type ConnectionInput,
} from '../connecting/connection.js';
import { GlideMQError, invalid } from '../shared/errors.js';
import { listenEvents } from './event-stream.js';
import { record, translate, type EmitEvent, type EventName, type QueueEventsListener } from './event-translation.js';
import { FinishWaiters } from './finish-waiters.js';
import { DEFAULT_PREFIX, QueueKeys } from '../shared/keys.js';
import { ReadyConnection } from '../connecting/ready-connection.js';
import { ListenerError, SafeEmitter } from '../shared/safe-emitter.js';

export type { QueueEventsListener } from './event-translation.js';

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

export const DEFAULT_BLOCKING_TIMEOUT = 10_000;
export const DEFAULT_PRESENCE_TTL = 30_000;
/** Entries taken per XREAD. */
const READ_COUNT = 200;

/** Typed on/once/off for the events of QueueEventsListener (the class itself is an ordinary EventEmitter). */
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
  /** The job.waitUntilFinished calls in progress. */
  private readonly finishes: FinishWaiters;
  /** emit, bound once: what translate calls for each event. */
  private readonly emitEvent: EmitEvent = this.emit.bind(this);
  private readonly ready: ReadyConnection;
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
    this.ready = new ReadyConnection(this.acquired);
    this.resetStarted();
    this.finishes = new FinishWaiters({
      name,
      keys: this.keys,
      client: () => this.client,
      position: () => this.position,
      reads: () => this.reads,
      started: () => this.started,
      closing: () => this.closing !== undefined,
    });
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
    return this.ready.get();
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
    if (!first && lapsed) this.finishes.recheckAll();
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
    void this.renew().then(() => this.finishes.recheckAll());
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
      this.finishes.caughtUp(entries.length === 0 ? read : undefined);
    }
  }

  /** Turns stream entries into events, in order (one pipelined lookup for `added` events that need one). */
  private async deliver(entries: [string, string[]][]): Promise<void> {
    const raws = entries.map(([id, fields]) => ({ id, fields, f: record(fields) }));
    const lookups = await this.lookupAdded(raws);
    for (const raw of raws) {
      this.position = raw.id;
      if (this.onEntry) this.handOver(this.onEntry, raw.id, raw.fields);
      this.finishes.settleWaiters(raw.f);
      translate(raw.id, raw.f, lookups.get(raw.id), this.emitEvent);
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

  // ------------------------------------------------------------------ waitUntilFinished

  /** What job.waitUntilFinished(this, ttl) returns (FinishWaiters.untilFinished says what it settles with). */
  untilFinished(jobId: string, ttl?: number): Promise<unknown> {
    return this.finishes.untilFinished(jobId, ttl);
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
      this.finishes.closeAll();
      await this.ready.settled(); // a Cluster client being set up is closed too
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
