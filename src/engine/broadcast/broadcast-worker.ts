/**
 * The consuming side of a broadcast: a worker of one subscription. All workers of a subscription
 * share one consumer group on the broadcast stream, so each message runs once per subscription;
 * other subscriptions get their own copy through their own group. A message a worker claimed and
 * did not finish stays pending in the group and is reclaimed by another worker of the same
 * subscription once its own lock has run out (each claim records this worker's lockDuration and
 * maxStalledCount, lua/broadcast.lua); retries and stall counts are kept per (subscription, message).
 *
 * One loop does all claiming, so claims never exceed free slots: due retries, then (when the stall
 * timer asked) stalled reclaim, then one blocking read of new messages that ends in time for the
 * next due retry. Messages whose subject the filter does not match are acked unprocessed.
 *
 * Events: active (message), completed (message, result, durationMs), failed (message, error,
 * durationMs, willRetry), stalled (entryId, 'reclaimed' | 'failed'), lost (message: its claim was
 * taken over; its result was not stored), lockLost (entryId), connectionLost (why) and
 * connectionRestored (ms down) as Worker's (connection-watch.ts), error, closed. A listener that throws
 * never stops the worker: the throw arrives as an `error` event (see SafeEmitter).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { BlockingConnection } from '../connecting/blocking-connection.js';
import { acquireClient, closeClient, settleTopology, type Acquired, type Client, type ConnectionInput } from '../connecting/connection.js';
import { IdleWaiters } from '../shared/idle-waiters.js';
import { isUnrecoverable, invalid } from '../shared/errors.js';
import { BroadcastKeys, DEFAULT_PREFIX } from '../shared/keys.js';
import { callFunction, ensureLibrary } from '../connecting/library.js';
import { checkConfirm, confirmedCall, type Confirm, type ConfirmOptions } from '../producing/confirm.js';
import { backoffDelay, parseBackoff, type BackoffOptions } from '../producing/options.js';
import { nonNegative, positive, wholeCount } from '../shared/numbers.js';
import { pairsToRecord } from '../shared/replies.js';
import { subjectFilter } from '../shared/subjects.js';
import type { BroadcastMessage } from './broadcast.js';
import { SafeEmitter } from '../shared/safe-emitter.js';
import { watchConnection } from '../connecting/connection-watch.js';
import { CLOSE_CALL_MS, delay, monotonic, within } from '../shared/waiting.js';

export type BroadcastProcessor<D = any, R = any> = (message: BroadcastMessage<D>) => Promise<R> | R;

export interface BroadcastWorkerOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** Subject filters (`orders.*`, `orders.>`); none = every subject. */
  subjects?: string[];
  concurrency?: number;
  /** A claim idle this long counts as stalled (ms); running messages heartbeat at half of it. */
  lockDuration?: number;
  /** How often stalled recovery runs (ms). */
  stalledInterval?: number;
  maxStalledCount?: number;
  /** Attempts per message for this subscription (default 1: no retry). */
  attempts?: number;
  backoff?: number | BackoffOptions | string;
  /** Where a new subscription starts: 'latest' (default: messages published from now on),
   * 'earliest' (every kept message) or an entry id. An existing subscription keeps its position. */
  startFrom?: 'latest' | 'earliest' | string;
  /** Longest wait of one blocking read (ms). */
  blockTimeout?: number;
  /** Longest gap between two looks for due retries that another worker scheduled (ms). */
  retryInterval?: number;
  autorun?: boolean;
  /** How long close() lets running messages finish (ms). */
  closeGracePeriod?: number;
  /** Each finish confirmed (README "Confirmed writes"): it counts as done only once WAITAOF / WAIT confirm it. */
  confirm?: ConfirmOptions;
}

interface Running {
  message: BroadcastMessage;
  fence: string;
}

type Entry = [string, string[]];

export class BroadcastWorker<D = any, R = any> extends SafeEmitter {
  readonly keys: BroadcastKeys;
  readonly consumer: string;
  readonly settings: Required<Omit<BroadcastWorkerOptions, 'connection' | 'prefix' | 'subjects' | 'backoff' | 'startFrom' | 'autorun' | 'confirm'>>;
  /** Finishes confirmed (one WAITAOF / WAIT each), or undefined: not confirmed. */
  readonly confirm: Confirm | undefined;
  private readonly acquired: Acquired;
  /** Ends the connectionLost/connectionRestored watch. */
  private unwatchConnection: (() => void) | undefined;
  private readonly matches: (subject: string) => boolean;
  private readonly subjects: string[];
  private readonly backoff: BackoffOptions | undefined;
  private readonly start: string;
  private blocker: BlockingConnection | undefined;
  private readonly active = new Map<string, Running>();
  private readonly idle = new IdleWaiters(() => this.active.size);
  private running = false;
  private readerRunning = false;
  private closing: Promise<void> | undefined;
  private reclaimDue = true;
  /** When (this process's monotonic clock, ms) the loop next looks for due retries. Only this
   * worker's own waiting uses it: the server answers due times as "in n ms". */
  private retryCheckAt = 0;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private stalledTimer: NodeJS.Timeout | undefined;
  readonly finished = { completed: 0, failed: 0 };

  constructor(
    readonly name: string,
    readonly subscription: string,
    private readonly processor: BroadcastProcessor<D, R>,
    opts: BroadcastWorkerOptions = {},
  ) {
    super();
    this.confirm = checkConfirm(opts.confirm);
    this.keys = new BroadcastKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    this.keys.sub(subscription); // validates the name
    this.subjects = opts.subjects ?? [];
    this.matches = subjectFilter(this.subjects);
    this.backoff = parseBackoff(opts.backoff);
    this.start = startId(opts.startFrom);
    const lockDuration = positive(opts.lockDuration ?? 30_000, 'lockDuration');
    this.settings = {
      concurrency: positive(opts.concurrency ?? 1, 'concurrency'),
      lockDuration,
      stalledInterval: positive(opts.stalledInterval ?? 30_000, 'stalledInterval'),
      maxStalledCount: wholeCount(opts.maxStalledCount ?? 1, 'maxStalledCount'),
      attempts: positive(opts.attempts ?? 1, 'attempts'),
      blockTimeout: positive(opts.blockTimeout ?? 5_000, 'blockTimeout'),
      retryInterval: positive(opts.retryInterval ?? 1_000, 'retryInterval'),
      closeGracePeriod: nonNegative(opts.closeGracePeriod ?? Math.max(lockDuration, 5_000), 'closeGracePeriod'),
    };
    this.consumer = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.acquired = acquireClient(opts.connection, { maxRetriesPerRequest: null });
    if (opts.autorun !== false) void this.run().catch((err) => this.emitError(err));
  }

  private get client(): Client {
    return this.acquired.client;
  }

  get activeCount(): number {
    return this.active.size;
  }

  private call(fn: string, args: (string | number)[]): Promise<unknown> {
    return callFunction(this.client, fn, this.keys.meta, args);
  }

  /** Creates the subscription if needed and starts the loop; resolves once it is running. */
  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    await settleTopology(this.acquired);
    await ensureLibrary(this.client);
    await this.subscribe();
    this.blocker = new BlockingConnection(this.acquired, this.keys.stream, this.settings.blockTimeout);
    await this.blocker.start();
    this.unwatchConnection = watchConnection(this.client, this, () => this.running && !this.closing);
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), Math.max(50, Math.floor(this.settings.lockDuration / 2)));
    this.stalledTimer = setInterval(() => {
      this.reclaimDue = true;
      void this.nudgeReader();
    }, this.settings.stalledInterval);
    this.kickReader();
  }

  private async subscribe(): Promise<void> {
    await this.call('glidemq_bcSubscribe', [this.subscription, this.start, JSON.stringify(this.subjects)]);
  }

  private freeSlots(): number {
    return this.settings.concurrency - this.active.size;
  }

  private kickReader(): void {
    if (this.running && !this.closing && !this.readerRunning && this.freeSlots() > 0) void this.readLoop();
  }

  private async readLoop(): Promise<void> {
    this.readerRunning = true;
    let failures = 0;
    try {
      while (this.running && !this.closing && this.freeSlots() > 0) {
        if (monotonic() >= this.retryCheckAt) await this.claimRetries();
        if (this.reclaimDue && this.freeSlots() > 0) {
          this.reclaimDue = false;
          await this.reclaim();
        }
        const want = this.freeSlots();
        if (want <= 0 || this.closing) break;
        const block = Math.max(1, Math.ceil(Math.min(this.settings.blockTimeout, this.retryCheckAt - monotonic())));
        const delivered = (await (this.blocker as BlockingConnection).block((c) =>
          c.xreadgroup('GROUP', this.subscription, this.consumer, 'COUNT', want, 'BLOCK', block, 'STREAMS', this.keys.stream, '>'),
        )) as [string, Entry[]][] | null;
        failures = 0;
        if (delivered?.[0]) await this.activate(delivered[0][1]);
      }
    } catch (err) {
      if (this.running && !this.closing) {
        failures++;
        // the subscription (consumer group) was deleted under us: create it again
        if (/NOGROUP/.test(String(err)) || (err as { code?: string }).code === 'ERR_NO_SUBSCRIPTION') {
          await this.subscribe().catch(() => undefined);
        } else this.emitError(err);
        await delay(Math.min(1000, 50 * 2 ** failures));
      }
    } finally {
      this.readerRunning = false;
    }
    this.kickReader();
  }

  private async activate(entries: Entry[]): Promise<void> {
    const run: Entry[] = [];
    const skip: string[] = [];
    for (const e of entries) {
      const f = pairsToRecord<string>(e[1]);
      if (this.matches(f.subject ?? '')) run.push(e);
      else skip.push(e[0]);
    }
    const r = (await this.call('glidemq_bcActivate', [
      this.subscription, this.consumer, ...this.claimTerms, run.length + skip.length, ...run.flatMap((e) => [e[0], 1]), ...skip.flatMap((id) => [id, 0]),
    ])) as (string | number)[][];
    const claimed = new Map(r.map((c) => [String(c[0]), c]));
    for (const [sid, fields] of run) {
      const c = claimed.get(sid);
      if (c) this.dispatch(sid, String(c[1]), Number(c[2]), Number(c[3]), pairsToRecord<string>(fields));
    }
  }

  private async claimRetries(): Promise<void> {
    const r = (await this.call('glidemq_bcRetries', [this.subscription, this.consumer, this.freeSlots(), ...this.claimTerms])) as unknown[];
    // nextDueIn: ms from the server's now until the earliest waiting retry (-1: none)
    const nextDueIn = Number(r[0]);
    this.retryCheckAt = monotonic() + this.settings.retryInterval;
    if (nextDueIn >= 0) this.retryCheckAt = Math.min(this.retryCheckAt, monotonic() + nextDueIn);
    await this.runClaimed(r.slice(1) as (string | number)[][]);
  }

  private async reclaim(): Promise<void> {
    // as Worker's stalled check: not while disconnected (it could run before the heartbeat that
    // re-asserts this worker's claims), and this worker's own claims are renewed first
    if (this.client.status !== 'ready') return;
    await this.heartbeat();
    const r = (await this.call('glidemq_bcReclaim', [
      this.subscription, this.consumer, this.settings.lockDuration, this.settings.maxStalledCount, this.freeSlots(),
    ])) as [(string | number)[][], string[], (string | number)[][]];
    for (const id of r[1]) this.emit('stalled', id, 'active', 'failed');
    for (const e of r[2] ?? []) this.emitStalledFailure(e);
    for (const e of r[0]) this.emit('stalled', String(e[0]), 'active', 'reclaimed');
    await this.runClaimed(r[0]);
  }

  /**
   * A message this worker's stalled check gave up on (stored as its processor's last failed
   * attempt would be: the dead-letter stream): `failed` (message, error, 'active'), as for a
   * message its processor failed. `e`: {id, reason, attemptsMade, stalledCount, subject, data, ts}.
   */
  private emitStalledFailure(e: (string | number)[]): void {
    const message: BroadcastMessage<D> = {
      id: String(e[0]),
      subject: String(e[4]),
      data: parseJson(String(e[5])) as D,
      timestamp: Number(e[6]) || 0,
      subscription: this.subscription,
      attemptsMade: Number(e[2]),
      stalledCount: Number(e[3]),
      willRetry: false,
      finishedOn: Date.now(),
    };
    this.emit('failed', message, new Error(String(e[1])), 'active');
  }

  /** Entries claimed by bcRetries/bcReclaim: {id, fence, attemptsMade, stalledCount, subject, data, ts}. */
  private async runClaimed(entries: (string | number)[][]): Promise<void> {
    const skip: string[] = [];
    for (const e of entries) {
      const f = { subject: String(e[4]), data: String(e[5]), ts: String(e[6]) };
      if (this.matches(f.subject)) this.dispatch(String(e[0]), String(e[1]), Number(e[2]), Number(e[3]), f);
      else skip.push(String(e[0]));
    }
    if (skip.length) {
      await this.call('glidemq_bcActivate', [this.subscription, this.consumer, ...this.claimTerms, skip.length, ...skip.flatMap((id) => [id, 0])]);
    }
  }

  /** The terms every claim of this worker records (lua/broadcast.lua): its lock and maxStalledCount, by which any worker's stalled check judges it. */
  private get claimTerms(): [number, number] {
    return [this.settings.lockDuration, this.settings.maxStalledCount];
  }

  private dispatch(id: string, fence: string, attemptsMade: number, stalledCount: number, f: Record<string, string>): void {
    const message: BroadcastMessage<D> = {
      id,
      subject: f.subject ?? '',
      data: parseJson(f.data) as D,
      timestamp: Number(f.ts) || 0,
      subscription: this.subscription,
      attemptsMade,
      stalledCount,
    };
    this.active.set(id, { message, fence });
    void this.execute(message, fence);
  }

  private async execute(message: BroadcastMessage<D>, fence: string): Promise<void> {
    const started = Date.now();
    message.processedOn = started;
    this.emit('active', message, 'waiting');
    let outcome: 'completed' | 'failed' = 'completed';
    let result: R | undefined;
    let error: Error | undefined;
    let retryDelay = -1;
    try {
      result = await this.processor(message);
    } catch (err) {
      error = err instanceof Error ? err : new Error(String(err));
      outcome = 'failed';
      if (!isUnrecoverable(error)) retryDelay = backoffDelay(this.backoff, message.attemptsMade + 1);
    }
    let status: string;
    try {
      const args = [
        this.subscription, this.consumer, message.id, fence, outcome,
        error ? error.message || error.name || 'processor failed' : '', retryDelay, this.settings.attempts,
      ];
      const what = () => ({ what: `finish of broadcast message ${message.id} by subscription ${this.subscription}` });
      status = String(await confirmedCall(this.client, 'glidemq_bcFinish', this.keys.meta, args, this.confirm, what));
    } catch (err) {
      // the claim stays pending: stalled recovery hands it to a healthy worker
      this.emitError(err);
      status = 'error';
    }
    this.active.delete(message.id);
    message.finishedOn = Date.now();
    if (status === 'completed') {
      this.finished.completed++;
      this.emit('completed', message, result, 'active');
    } else if (status === 'failed' || status === 'retrying') {
      if (status === 'failed') this.finished.failed++;
      else {
        this.retryCheckAt = Math.min(this.retryCheckAt, monotonic() + retryDelay);
        void this.nudgeReader();
      }
      message.willRetry = status === 'retrying';
      this.emit('failed', message, error, 'active');
    } else if (status === 'stale') {
      this.emit('lost', message);
    }
    this.idle.settle();
    this.kickReader();
  }

  private async heartbeat(): Promise<void> {
    if (this.active.size === 0) return;
    const pairs: string[] = [];
    for (const [id, r] of this.active) pairs.push(id, r.fence);
    try {
      const lost = (await this.call('glidemq_bcExtend', [this.subscription, this.consumer, pairs.length / 2, ...pairs])) as string[];
      for (const id of lost) this.emit('lockLost', id);
    } catch (err) {
      if (this.running && !this.closing) this.emitError(err);
    }
  }

  /** Ends the blocking read early so the loop looks again (a retry came due, stall check, close). */
  private async nudgeReader(): Promise<void> {
    await this.blocker?.unblock(this.client);
  }

  /** Graceful stop: claim nothing more, let running messages finish (up to the grace period), leave. */
  close(force = false): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.stalledTimer);
      // as Worker's close: a server that is gone must not hold it (calls only on a live
      // connection, each bounded; what they would have done is left to recovery)
      const live = () => this.client.status === 'ready';
      if (live()) await within(this.nudgeReader(), CLOSE_CALL_MS);
      if (!force && this.active.size > 0) await within(this.idle.wait(), this.settings.closeGracePeriod);
      clearInterval(this.heartbeatTimer);
      this.unwatchConnection?.();
      this.running = false;
      if (this.active.size === 0 && live()) {
        await within(this.call('glidemq_bcRemoveIdleConsumer', [this.subscription, this.consumer]), CLOSE_CALL_MS);
      }
      this.blocker?.close();
      if (this.acquired.owned) await closeClient(this.client);
      this.emit('closed');
    })();
    return this.closing;
  }

  private emitError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}

function startId(s: BroadcastWorkerOptions['startFrom']): string {
  if (s === undefined || s === 'latest') return '$';
  if (s === 'earliest') return '0';
  if (typeof s === 'string' && /^\d+(-\d+)?$/.test(s)) return s;
  throw invalid(`startFrom must be "latest", "earliest" or a stream entry id, got ${String(s)}`);
}


function parseJson(text: string | undefined): unknown {
  if (text === undefined || text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

