/**
 * The queue's event stream as a log (`glidemq events`): its entries as they are stored
 * (lua/helpers.lua emit: `event`, `jobId`, then the event's own fields), not translated into
 * BullMQ's events as QueueEvents does. `recent` reads the newest entries (or those after an id);
 * `follow` then reads live until close(), through a QueueEvents (its onEntry hands over each entry
 * as stored): one read loop for both.
 *
 * While it follows, an EventLog registers its presence as a QueueEvents does
 * (glidemq_listenEvents, lua/events.lua), so the per-job events (`active`, `completed`,
 * `retries-exhausted`, `drained`) are written too; before it started, those appear only for the
 * times some QueueEvents listened. The stream keeps about the last 1000 events.
 */
import {
  acquireClient, closeClient, duplicateClient, settleTopology, type Acquired, type Client, type ConnectionInput,
} from '../connecting/connection.js';
import { invalid } from '../shared/errors.js';
import { listenEvents } from '../inspecting/event-stream.js';
import { DEFAULT_PREFIX, QueueKeys } from '../shared/keys.js';
import { ensureLibrary } from '../connecting/library.js';
import { QueueEvents } from '../inspecting/queue-events.js';

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

/** `'0'`, `'1700000000000'` or `'1700000000000-3'`: a stream id to read after. */
export function checkEventId(id: string, what = 'event id'): string {
  if (typeof id !== 'string' || !/^\d+(-\d+)?$/.test(id)) {
    throw invalid(`${what} must be a stream id such as 0 or 1700000000000-0 (the id column of glidemq events), got ${JSON.stringify(id)}`);
  }
  return id;
}

/** A follow is a service: its connections reconnect for as long as it runs (a CLI's give up after a few tries). */
const LASTING = { maxRetriesPerRequest: null, retryStrategy: (n: number) => Math.min(n * 200, 2000) };

export class EventLog {
  readonly keys: QueueKeys;
  private readonly acquired: Acquired;
  private readonly blockingTimeout: number;
  private readonly presenceTtl: number;
  private ready: Promise<Client> | undefined;
  /** The live reader, made by follow(). */
  private events: QueueEvents | undefined;
  /** The connection given to `events` when this EventLog was given a client (it is ours to close). */
  private lasting: Client | undefined;
  private closed = false;
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
    // the presence is registered with the tail read, so every per-job event after it is written
    const { last: tail } = await listenEvents(c, this.keys, this.presenceTtl, true);
    if (limit > 0 && tail !== '0-0') {
      const entries = (await c.xrevrange(this.keys.events, tail, '-', 'COUNT', limit)) as [string, string[]][];
      for (const e of entries.reverse()) opts.onEvent(decode(e));
    }
    return this.follow({ ...opts, since: tail });
  }

  /**
   * A QueueEvents that listens (registering its presence only on a queue that exists, see
   * listenEvents) and hands each entry to onEvent; runs until close().
   */
  private async readLive(opts: FollowOptions): Promise<void> {
    await this.connect(); // an unreachable server fails here, with the first connection's short patience
    if (this.closed) return;
    // set until onEvent throws: the follow then ends with that error, and nothing more is handed over
    let fail: ((err: unknown) => void) | undefined;
    const threw = new Promise<never>((_, reject) => (fail = reject));
    const events = new QueueEvents(this.name, {
      connection: this.lastingConnection(),
      prefix: this.keys.prefix,
      autorun: false,
      lastEventId: opts.since ?? '$',
      blockingTimeout: this.blockingTimeout,
      presenceTtl: this.presenceTtl,
      presenceIfExists: true,
      onConnection: opts.onConnection,
      onEntry: (id, fields) => {
        if (!fail) return;
        try {
          opts.onEvent(decode([id, fields]));
        } catch (err) {
          fail(err);
          fail = undefined;
        }
      },
    });
    this.events = events;
    // a read or renewal that failed is retried by the QueueEvents: not the follower's news
    events.on('error', () => undefined);
    await Promise.race([events.run(), threw]);
  }

  /**
   * The connection for the QueueEvents, reconnecting as long as it follows: from the settings
   * (a cluster's blocking connection then gets its longer socket timeout too), or a duplicate of
   * the client this EventLog was given.
   */
  private lastingConnection(): ConnectionInput {
    const s = this.acquired.settings;
    if (s) return { ...s, options: { ...s.options, ...LASTING } };
    this.lasting = duplicateClient(this.acquired, LASTING);
    return this.lasting;
  }

  /** Stops following and closes the connections. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.events?.close(); // ends the blocking read in progress
    await this.following?.catch(() => undefined);
    if (this.lasting) await closeClient(this.lasting, 500);
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
