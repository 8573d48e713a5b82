/**
 * The publishing side of a broadcast: every subscription (a consumer group on the broadcast's one
 * stream) gets every message, and each subscription's workers share its messages between them.
 * Messages are not deleted after processing; `maxMessages` caps the stream by trimming the oldest
 * entries on publish, read or not. A publish is stored once even when its reply is lost and ioredis
 * re-sends it: a Broadcast is a producer as a Queue is (lua/producers.lua, ./producer.ts).
 */
import { acquireClient, closeClient, settleTopology, type Acquired, type Client, type ConnectionInput } from '../connecting/connection.js';
import { invalid } from '../shared/errors.js';
import { BroadcastKeys, DEFAULT_PREFIX } from '../shared/keys.js';
import { checkConfirm, confirmedCall, pickConfirm, type Confirm, type ConfirmOptions } from '../producing/confirm.js';
import { callFunction, ensureLibrary } from '../connecting/library.js';
import { DEFAULT_MAX_PAYLOAD } from '../producing/options.js';
import { dataJson } from '../producing/job-checks.js';
import { Producer } from '../producing/producer.js';
import { validateSubject } from '../shared/subjects.js';
import { SafeEmitter } from '../shared/safe-emitter.js';

export interface BroadcastOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** Hard cap on kept messages: each publish trims the oldest beyond it (0 = no cap). */
  maxMessages?: number;
  /** Largest accepted message data, in bytes of JSON (default 512 KiB). */
  maxPayloadBytes?: number;
  /** Confirmed writes for every publish (README "Confirmed writes"); a publish's own `confirm` overrides it. */
  confirm?: ConfirmOptions;
}

export interface SubscriptionInfo {
  name: string;
  /** Entry id up to which the subscription has read. */
  lastDeliveredId: string;
  /** Messages claimed by its workers and not finished (running, or waiting out a retry). */
  pending: number;
  /**
   * Messages kept in the stream that it has not read yet (null when the server cannot tell).
   * Messages trimmed before it read them are not here: see `trimmedUnread`.
   */
  lag: number | null;
  /**
   * Messages published after its position (its start, for a new subscription) that `maxMessages`
   * trimmed before it read them: it never gets them (null when the server cannot tell).
   */
  trimmedUnread: number | null;
  consumers: number;
}

/** A message as a processor sees it. */
export interface BroadcastMessage<D = unknown> {
  /** The stream entry id. */
  id: string;
  subject: string;
  data: D;
  /** Publish time (ms, the server's clock: glidemq_bcPublish stores its TIME). */
  timestamp: number;
  subscription: string;
  /** Failed attempts so far for this subscription. */
  attemptsMade: number;
  /** Times this subscription's claim on the message stalled. */
  stalledCount: number;
  /** When this run started and ended (ms, this process's clock; set by the BroadcastWorker). */
  processedOn?: number;
  finishedOn?: number;
  /** After a failed run: whether the subscription runs the message again. */
  willRetry?: boolean;
}

/** An event emitter as Queue is: a listener that throws arrives as `error` (see SafeEmitter). */
export class Broadcast extends SafeEmitter {
  readonly keys: BroadcastKeys;
  private readonly acquired: Acquired;
  private readonly maxMessages: number;
  private readonly maxPayload: number;
  private readonly producer = new Producer();
  private ready: Promise<void> | undefined;
  /** The confirm option checked (undefined: publishes are not confirmed unless one asks). */
  readonly confirm: Confirm | undefined;

  constructor(
    readonly name: string,
    opts: BroadcastOptions = {},
  ) {
    super();
    this.keys = new BroadcastKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    const max = opts.maxMessages ?? 0;
    if (!Number.isInteger(max) || max < 0) throw invalid(`maxMessages must be a whole number >= 0, got ${String(opts.maxMessages)}`);
    this.maxMessages = max;
    this.maxPayload = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD;
    this.confirm = checkConfirm(opts.confirm);
    this.acquired = acquireClient(opts.connection);
  }

  get client(): Client {
    return this.acquired.client;
  }

  waitUntilReady(): Promise<void> {
    this.ready ??= (async () => {
      await settleTopology(this.acquired);
      await ensureLibrary(this.client);
    })();
    return this.ready;
  }

  /**
   * Adds a message for every subscription; resolves to its entry id. Once per call: a call re-sent
   * after its reply was lost (a cut connection, a server restart) stores nothing again and resolves
   * to the id the first run stored.
   */
  async publish(subject: string, data: unknown = {}, opts: { confirm?: ConfirmOptions | false } = {}): Promise<string> {
    validateSubject(subject);
    const confirm = pickConfirm(opts.confirm, this.confirm);
    const json = dataJson(data, 'message');
    const size = Buffer.byteLength(json);
    if (this.maxPayload > 0 && size > this.maxPayload) {
      throw invalid(`message data is ${size} bytes, over the limit of ${this.maxPayload} bytes; store large data elsewhere and publish a reference`);
    }
    await this.waitUntilReady();
    const call = this.producer.next();
    // reply: the server's ts of the message, then its entry id
    const what = () => ({ what: `publish of "${subject}" to broadcast ${this.name}` });
    const reply = confirmedCall(this.client, 'glidemq_bcPublish', this.keys.meta, [this.maxMessages, ...call.args, subject, json], confirm, what);
    const [, id] = (await reply.finally(call.done)) as [number, string];
    return String(id);
  }

  /** Messages kept in the stream. */
  async length(): Promise<number> {
    await this.waitUntilReady();
    return this.client.xlen(this.keys.stream);
  }

  /** The subscriptions (consumer groups) of this broadcast and where each one is. */
  async subscriptions(): Promise<SubscriptionInfo[]> {
    await this.waitUntilReady();
    // one atomic read on the server: lag and trimmedUnread are of the same moment
    const rows = (await callFunction(this.client, 'glidemq_bcSubscriptions', this.keys.meta, [])) as unknown[][];
    const count = (v: unknown) => (Number(v) >= 0 ? Number(v) : null); // -1: the server cannot tell
    return rows.map(([name, lastDeliveredId, pending, consumers, lag, trimmedUnread]) => ({
      name: String(name),
      lastDeliveredId: String(lastDeliveredId),
      pending: Number(pending),
      lag: count(lag),
      trimmedUnread: count(trimmedUnread),
      consumers: Number(consumers),
    }));
  }

  async close(): Promise<void> {
    // The replies the server keeps for this producer's calls are never asked for again once every
    // call settled: drop them now rather than when they expire (an hour on). Not awaited, and only
    // on a live connection, as Queue.close() does.
    if (this.producer.used && this.producer.settled && this.client.status === 'ready') {
      this.client.del(this.keys.producerPrefix + this.producer.id).catch(() => undefined);
    }
    if (this.acquired.owned) await closeClient(this.client);
  }
}

