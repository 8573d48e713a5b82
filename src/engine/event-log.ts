/**
 * The queue's event stream as a log (`glidemq events`): its entries as they are stored
 * (lua/helpers.lua emit: `event`, `jobId`, then the event's own fields), not translated into
 * BullMQ's events as QueueEvents does. `recent` reads the newest entries (or those after an id);
 * `follow` then reads live with a blocking XREAD on a connection of its own until close().
 *
 * While it follows, an EventLog registers its presence as a QueueEvents does
 * (glidemq_listenEvents, lua/events.lua), so the per-job events (`active`, `completed`,
 * `retries-exhausted`, `drained`) are written too; before it started, those appear only for the
 * times some QueueEvents listened. The stream keeps about the last 1000 events.
 */
import type { Redis } from 'ioredis';
import { RetryWait } from './waiting.js';
import {
  acquireClient, closeClient, duplicateClient, settleTopology, socketTimeoutOf, type Acquired, type Client, type ConnectionInput,
} from './connection.js';
import { invalid } from './errors.js';
import { DEFAULT_PREFIX, QueueKeys } from './keys.js';
import { callFunction, ensureLibrary } from './library.js';
import { compareIds } from './queue-events.js';

export interface EventRecord {
  /** The stream entry id (`<ms>-<seq>`): pass it as `since` to read what came after. */
  id: string;
  /** When it was written: ms since the epoch, the server's clock (from the entry id). */
  ts: number;
  event: string;
  /** '' for queue-wide events (paused, resumed, drained, cleaned). */
  jobId: string;
  /** The event's other fields as stored (reason, delay, returnvalue, prev, ...). */
  details: Record<string, string>;
}

export interface EventLogOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** Longest wait of one blocking read while following, ms (default 5000). */
  blockingTimeout?: number;
  /** How long the listening presence lasts, ms; renewed every third of it (default 30000). */
  presenceTtl?: number;
}

export interface RecentOptions {
  /** Only events after this stream id (exclusive), the oldest of them first. */
  since?: string;
  /** At most this many: the newest ones, or without `since` the first after it (default 50). */
  limit?: number;
}

export interface FollowOptions {
  /** Read live from after this id; default: the newest event when follow() starts. */
  since?: string;
  /** Every event, in order. */
  onEvent: (e: EventRecord) => void;
  /** The connection of the live read was lost ('lost'; it reconnects on its own) or is back ('back'). */
  onConnection?: (state: 'lost' | 'back') => void;
}

const READ_COUNT = 200;

/** `'0'`, `'1700000000000'` or `'1700000000000-3'`: a stream id to read after. */
export function checkEventId(id: string, what = 'event id'): string {
  if (typeof id !== 'string' || !/^\d+(-\d+)?$/.test(id)) {
    throw invalid(`${what} must be a stream id such as 0 or 1700000000000-0 (the id column of glidemq events), got ${JSON.stringify(id)}`);
  }
  return id;
}

export class EventLog {
  readonly keys: QueueKeys;
  private readonly acquired: Acquired;
  private readonly blockingTimeout: number;
  private readonly presenceTtl: number;
  private ready: Promise<Client> | undefined;
  private blocker: Client | undefined;
  private presence: Client | undefined;
  private presenceTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly retry = new RetryWait();
  private following: Promise<void> | undefined;

  constructor(
    readonly name: string,
    opts: EventLogOptions = {},
  ) {
    this.keys = new QueueKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    this.blockingTimeout = opts.blockingTimeout ?? 5000;
    this.presenceTtl = opts.presenceTtl ?? 30_000;
    this.acquired = acquireClient(opts.connection);
  }

  private connect(): Promise<Client> {
    this.ready ??= settleTopology(this.acquired).then(async (c) => {
      await ensureLibrary(c);
      return c;
    });
    return this.ready;
  }

  /** Whether the queue was ever used (it has its meta hash). Writes nothing. */
  async exists(): Promise<boolean> {
    const c = await this.connect();
    return (await c.exists(this.keys.meta)) === 1;
  }

  /** The newest `limit` events, oldest first; with `since`, the first `limit` after it. */
  async recent(opts: RecentOptions = {}): Promise<EventRecord[]> {
    const limit = opts.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 0) throw invalid(`limit must be a whole number >= 0, got ${String(limit)}`);
    if (limit === 0) return [];
    const c = await this.connect();
    if (opts.since !== undefined) {
      const entries = (await c.xrange(this.keys.events, `(${checkEventId(opts.since, 'since')}`, '+', 'COUNT', limit)) as [string, string[]][];
      return entries.map(decode);
    }
    const entries = (await c.xrevrange(this.keys.events, '+', '-', 'COUNT', limit)) as [string, string[]][];
    return entries.reverse().map(decode);
  }

  /**
   * Registers the presence, then hands every event after `since` (default: the newest at the
   * start) to onEvent as it is written, until close(). The live read rides out a lost connection
   * (it reconnects and goes on after the last event it handed over); resolves when closed.
   */
  follow(opts: FollowOptions): Promise<void> {
    if (this.following) return Promise.reject(new Error(`the event log of ${this.name} already follows`));
    if (opts.since !== undefined) checkEventId(opts.since, 'since');
    this.following = this.readLive(opts);
    return this.following;
  }

  /**
   * The newest `limit` events (oldest first) handed to onEvent, then follow() from right after
   * them: no event is missed or shown twice in between.
   */
  async recentThenFollow(limit: number, opts: Omit<FollowOptions, 'since'>): Promise<void> {
    const c = await this.connect();
    const tail = await this.announce(c);
    if (limit > 0 && tail !== '0-0') {
      const entries = (await c.xrevrange(this.keys.events, tail, '-', 'COUNT', limit)) as [string, string[]][];
      for (const e of entries.reverse()) opts.onEvent(decode(e));
    }
    return this.follow({ ...opts, since: tail });
  }

  /**
   * Registers (renews) the listening presence on `c`; the id of the newest event ('0-0': none).
   * Only on a queue that exists: the presence is a field of its meta hash, and reading the events
   * of a queue nothing used must not make it (a later renewal registers once the queue is there;
   * an obliterate in the instant between the two calls would leave the meta hash behind).
   */
  private async announce(c: Client): Promise<string> {
    if ((await c.exists(this.keys.meta)) === 1) {
      const r = (await callFunction(c, 'glidemq_listenEvents', this.keys.meta, [this.presenceTtl])) as [string, number];
      return String(r[0]);
    }
    const last = (await c.xrevrange(this.keys.events, '+', '-', 'COUNT', 1)) as [string, string[]][];
    return last[0]?.[0] ?? '0-0';
  }

  private async readLive(opts: FollowOptions): Promise<void> {
    const c = await this.connect();
    let position = opts.since ?? (await this.announce(c));
    if (this.closed) return;
    // Connections of their own that reconnect for as long as it follows, whatever the first
    // connection's settings (a CLI's give up after a few tries): a follow is a service.
    const lasting = { maxRetriesPerRequest: null, retryStrategy: (n: number) => Math.min(n * 200, 2000) };
    this.presence = duplicateClient(this.acquired, lasting);
    const presence = this.presence;
    let renewing = false;
    const renew = () => {
      if (renewing || this.closed) return;
      renewing = true;
      this.announce(presence).catch(() => undefined).finally(() => (renewing = false));
    };
    renew();
    this.presenceTimer = setInterval(renew, Math.floor(this.presenceTtl / 3));
    const blocker = duplicateClient(this.acquired, {
      ...lasting,
      // a blocking read is silent for up to blockingTimeout by design
      socketTimeout: this.blockingTimeout + socketTimeoutOf(this.acquired),
    });
    this.blocker = blocker;
    if (opts.onConnection) {
      let lost = false;
      blocker.on('close', () => {
        if (!lost && !this.closed) opts.onConnection?.('lost');
        lost = true;
      });
      blocker.on('ready', () => {
        if (lost && !this.closed) opts.onConnection?.('back');
        lost = false;
        renew(); // a restarted server may have lost the presence
      });
    }
    while (!this.closed) {
      let reply: [string, [string, string[]][]][] | null;
      try {
        reply = (await (blocker as Redis).xread(
          'COUNT', READ_COUNT, 'BLOCK', this.blockingTimeout, 'STREAMS', this.keys.events, position,
        )) as [string, [string, string[]][]][] | null;
        this.retry.reset();
      } catch {
        if (this.closed) break;
        await this.retry.next();
        continue;
      }
      if (this.closed) break;
      for (const entry of reply?.[0]?.[1] ?? []) {
        if (compareIds(entry[0], position) <= 0) continue;
        position = entry[0];
        opts.onEvent(decode(entry));
      }
    }
  }

  /** Stops following and closes the connections. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.presenceTimer);
    this.retry.wake();
    this.blocker?.disconnect(); // ends a blocking read in progress
    await this.following?.catch(() => undefined);
    this.blocker?.disconnect(); // made while close() began
    if (this.presence) await closeClient(this.presence, 500);
    await this.ready?.catch(() => undefined);
    if (this.acquired.owned) await closeClient(this.acquired.client);
  }
}

function decode([id, fields]: [string, string[]]): EventRecord {
  const details: Record<string, string> = {};
  let event = '';
  let jobId = '';
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const [k, v] = [fields[i], fields[i + 1]];
    if (k === 'event') event = v;
    else if (k === 'jobId') jobId = v;
    else details[k] = v;
  }
  return { id, ts: Number(id.split('-')[0]), event, jobId, details };
}
