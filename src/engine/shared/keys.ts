/**
 * The only place that spells glidemq key names. Every key of one queue carries the `{<queue>}`
 * hash tag, so every function call touches a single cluster slot.
 */
import { invalid } from './errors.js';

export const DEFAULT_PREFIX = 'glide';
export const CONSUMER_GROUP = 'workers';
export const MAX_QUEUE_NAME = 200;

/** Queue names become part of a hash tag: braces, colons, whitespace and control characters are refused. */
export function validateQueueName(name: string, what = 'queue name'): string {
  if (typeof name !== 'string' || name.length === 0) throw invalid(`${what} is empty`);
  if (name.length > MAX_QUEUE_NAME) throw invalid(`${what} is longer than ${MAX_QUEUE_NAME} characters`);
  if (/[{}:\s\p{Cc}*?\[\]]/u.test(name)) {
    throw invalid(`invalid ${what} "${name}": it may not contain '{', '}', ':', '*', '?', '[', ']' or whitespace`);
  }
  return name;
}

export function validatePrefix(prefix: string): string {
  if (!prefix || /[{}\s\p{Cc}*?\[\]]/u.test(prefix)) throw invalid(`invalid key prefix "${prefix}"`);
  return prefix;
}

/** The prefix and queue name of a queue key, `<prefix>:{<queue>}` (a flow job's parent.queueKey), or undefined for a text that is not one. */
export function parseQueueKey(queueKey: string): { prefix: string; queue: string } | undefined {
  const m = /^(.+):\{([^{}]+)\}$/.exec(queueKey);
  return m ? { prefix: m[1], queue: m[2] } : undefined;
}

/**
 * The job key a BullMQ job reference names (the `parent` option, moveToWaitingChildren's `child`):
 * `{ id, queue }` where `queue` is `<prefix>:{<name>}` (glidemq's queue key), `<prefix>:<name>`
 * (BullMQ's), or a bare queue name (then `defaultPrefix`). `what` names it in a refusal.
 */
export function refJobKey(ref: { id: string; queue: string }, defaultPrefix: string, what = 'parent'): string {
  if (typeof ref !== 'object' || ref === null || typeof ref.id !== 'string' || typeof ref.queue !== 'string') {
    throw invalid(`${what} must be {id, queue}: the ${what} job's id and its queue key ("<prefix>:{<queue>}")`);
  }
  if (ref.id === '' || /[:\s{}\p{Cc}]/u.test(ref.id)) throw invalid(`${what}.id "${ref.id}" is not a job id`);
  const braced = /^(.+):\{([^{}]+)\}$/.exec(ref.queue);
  if (braced) return new QueueKeys(braced[2], braced[1]).job(ref.id);
  const colon = ref.queue.lastIndexOf(':');
  if (colon > 0) return new QueueKeys(ref.queue.slice(colon + 1), ref.queue.slice(0, colon)).job(ref.id);
  return new QueueKeys(ref.queue, defaultPrefix).job(ref.id);
}

export class QueueKeys {
  readonly base: string;
  constructor(
    readonly queue: string,
    readonly prefix: string = DEFAULT_PREFIX,
  ) {
    validateQueueName(queue);
    validatePrefix(prefix);
    this.base = `${prefix}:{${queue}}`;
  }
  /** Job id counter (INCR). */
  get id() { return `${this.base}:id`; }
  /** Queue settings and bookkeeping: paused, listActiveSeeded, listActiveScanCursor, ... */
  get meta() { return `${this.base}:meta`; }
  /** FIFO waiting + active delivery state (consumer group `workers`). */
  get stream() { return `${this.base}:stream`; }
  /** Wakes blocked workers when a priority/LIFO job becomes ready (same consumer group). */
  get wake() { return `${this.base}:wake`; }
  /** Delayed jobs (score: run-at ms), including retries with backoff and step jobs. */
  get scheduled() { return `${this.base}:scheduled`; }
  /** Prioritized waiting jobs (score: priority * 2^31 + sequence). */
  get prioritized() { return `${this.base}:prioritized`; }
  /** LIFO waiting jobs (LPUSH / LPOP). */
  get lifo() { return `${this.base}:lifo`; }
  /** Ids of claimed priority/LIFO jobs (they have no pending entry). */
  get listActiveIds() { return `${this.base}:list-active-ids`; }
  /** Count of claimed priority/LIFO jobs. */
  get listActive() { return `${this.base}:list-active`; }
  get completed() { return `${this.base}:completed`; }
  get failed() { return `${this.base}:failed`; }
  /** Bounded stream of queue events (added, failed, retrying, ...; completed only on a queue with a globalConcurrency limit, see lua/finish.lua). */
  get events() { return `${this.base}:events`; }
  get schedulers() { return `${this.base}:schedulers`; }
  get dedup() { return `${this.base}:dedup`; }
  /** Prefix of job hashes; `job(id)` is one job. */
  get jobPrefix() { return `${this.base}:job:`; }
  job(id: string) { return `${this.base}:job:${id}`; }
  logs(id: string) { return `${this.base}:job:${id}:logs`; }
  metrics(kind: string) { return `${this.base}:metrics:${kind}`; }
  /** One group's state hash: limits, active count and holders, rate window, token bucket, sequence. */
  group(key: string) { return `${this.base}:group:{${key}}`; }
  /** One group's waiting jobs (zset, score = the group's ordering sequence). */
  groupJobs(key: string) { return `${this.base}:group:{${key}}:jobs`; }
  /** Groups with waiting jobs that may run now (zset, score = turn, for round robin). */
  get readyGroups() { return `${this.base}:ready-groups`; }
  /** Groups held back by a rate window or an empty token bucket (zset, score = ms when they may run). */
  get timedGroups() { return `${this.base}:timed-groups`; }
  /** Prefix of the producers' once-only hashes (lua/producers.lua); `producer(id)` is one. */
  get producerPrefix() { return `${this.base}:producer:`; }
  producer(id: string) { return `${this.base}:producer:${id}`; }
  /** Starts of the last rate window (zset, score = ms of the start; lua/rate-window.lua). */
  get rateLog() { return `${this.base}:rate-log`; }
  /** The worker registry: worker id (its consumer name) → info JSON (lua/workers.lua). */
  get workers() { return `${this.base}:workers`; }
  /** When each registered worker's entry expires (zset, score = ms on the server's clock). */
  get workersExpiry() { return `${this.base}:workers-expiry`; }
  /**
   * Finishes that removed their job (removeOnComplete / removeOnFail), with the claims that
   * finished it: a finish sent again after its reply was lost is answered from here (lua/finish.lua).
   */
  get removedFinishes() { return `${this.base}:removed-finishes`; }
  /** Parents waiting for their children (zset, score = ms they began to wait, server TIME; lua/flow-keys.lua). */
  get waitingChildren() { return `${this.base}:waiting-children`; }
  /** Settlements this queue's children owe to parents in another queue (hash; lua/flow-keys.lua). */
  get flowOutbox() { return `${this.base}:flow-outbox`; }
  /** Journals of flows stored in parts across hash slots (hash flow id -> its remaining parts, JSON; lua/flow-journal.lua). */
  get flows() { return `${this.base}:flows`; }
  /** The same journals by the server's ms they were written (zset), for the replay of one a producer left. */
  get flowsDue() { return `${this.base}:flows-due`; }
  /** Dead letters this queue owes to its dead-letter queue in another slot (hash id -> record JSON; lua/dead-letters.lua). */
  get deadOutbox() { return `${this.base}:dead-outbox`; }
  /** A parent's children not settled yet (set of job keys). */
  deps(id: string) { return `${this.base}:job:${id}:deps`; }
  /** A parent's completed children: child job key → return value JSON. */
  processed(id: string) { return `${this.base}:job:${id}:processed`; }
  /** A parent's failed children (failParentOnFailure, continueParentOnFailure): child job key → reason. */
  failedChildren(id: string) { return `${this.base}:job:${id}:failed`; }
  /** A parent's ignored failures (ignoreDependencyOnFailure): child job key → reason. */
  ignored(id: string) { return `${this.base}:job:${id}:ignored`; }
  /** SCAN pattern for this queue's job hashes. */
  get jobPattern() { return `${this.base}:job:*`; }
}

/**
 * The type each of a queue's own structures must have, given its meta key: used to name the key
 * when a server answers WRONGTYPE (another program wrote to a glidemq key).
 */
export function queueStructureTypes(metaKey: string): [key: string, type: string][] {
  if (!metaKey.endsWith(':meta')) return [];
  const base = metaKey.slice(0, -':meta'.length);
  const shape: [string, string][] = [
    ['meta', 'hash'], ['id', 'string'], ['stream', 'stream'], ['wake', 'stream'], ['scheduled', 'zset'],
    ['prioritized', 'zset'], ['lifo', 'list'], ['list-active-ids', 'set'], ['list-active', 'string'],
    ['completed', 'zset'], ['failed', 'zset'], ['events', 'stream'], ['schedulers', 'hash'], ['dedup', 'hash'],
    ['ready-groups', 'zset'], ['timed-groups', 'zset'], ['rate-log', 'zset'],
    ['workers', 'hash'], ['workers-expiry', 'zset'], ['removed-finishes', 'hash'],
    ['waiting-children', 'zset'], ['flow-outbox', 'hash'], ['flows', 'hash'], ['flows-due', 'zset'],
    ['dead-outbox', 'hash'],
  ];
  return shape.map(([suffix, type]) => [`${base}:${suffix}`, type]);
}

export const MAX_GROUP_ID = 256;

/** Group ids sit inside braces in a key name: braces, whitespace and control characters are refused. */
export function validateGroupId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0) throw invalid('group.id must be a non-empty string');
  // Bytes, as the server counts them (lua/args.lua MAX_ID_LEN): characters would let a multi-byte id through here.
  if (Buffer.byteLength(id) > MAX_GROUP_ID) throw invalid(`group.id is longer than ${MAX_GROUP_ID} bytes`);
  if (/[{}\s\p{Cc}]/u.test(id)) throw invalid(`invalid group.id "${id}": it may not contain '{', '}' or whitespace`);
  return id;
}

/**
 * Keys of one broadcast: a stream that is never XDEL'd (trimmed only by maxMessages), one consumer
 * group per subscription on it, and per-subscription state keyed by stream entry id.
 */
export class BroadcastKeys {
  readonly base: string;
  constructor(
    readonly broadcast: string,
    readonly prefix: string = DEFAULT_PREFIX,
  ) {
    validateQueueName(broadcast, 'broadcast name');
    validatePrefix(prefix);
    this.base = `${prefix}:{${broadcast}}:broadcast`;
  }
  /** The messages (fields: subject, data, ts). Consumer group = subscription name. */
  get stream() { return this.base; }
  /** Broadcast bookkeeping (createdAt, maxMessages); KEYS[1] of every broadcast function. */
  get meta() { return `${this.base}:meta`; }
  /** Per-subscription, per-message state: fence, attempts made, stalled count (fields `n:|a:|s:<entryId>`). */
  sub(subscription: string) {
    validateQueueName(subscription, 'subscription name');
    return `${this.base}:sub:${subscription}`;
  }
  /** Messages of a subscription waiting out a retry backoff (zset, score = due ms). */
  retry(subscription: string) { return `${this.base}:sub:${subscription}:retry`; }
  /** Messages a subscription gave up on (capped stream: entry id, subject, reason, attempts). */
  dead(subscription: string) { return `${this.base}:sub:${subscription}:dead`; }
  /** Prefix of the publishers' once-only reply hashes (lua/producers.lua); + producer id. */
  get producerPrefix() { return `${this.base}:producer:`; }
}

/** Pattern that finds every queue's meta key under a prefix (for `queues`, `heal --all`). */
export function metaPattern(prefix: string): string {
  return `${prefix}:{*}:meta`;
}

/** Extracts the queue name from a key of the form `<prefix>:{<queue>}:...`. */
export function queueFromKey(prefix: string, key: string): string | undefined {
  if (!key.startsWith(`${prefix}:{`)) return undefined;
  const close = key.indexOf('}', prefix.length + 2);
  if (close < 0) return undefined;
  return key.slice(prefix.length + 2, close);
}
