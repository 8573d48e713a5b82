/**
 * The only place that spells glidemq key names. Every key of one queue carries the `{<queue>}`
 * hash tag, so every function call touches a single cluster slot.
 */
import { invalid } from './errors.js';

export const DEFAULT_PREFIX = 'glide';
export const CONSUMER_GROUP = 'workers';
export const MAX_QUEUE_NAME = 200;

/** Queue names become part of a hash tag: braces, colons, whitespace and control characters are refused. */
export function validateQueueName(name: string): string {
  if (typeof name !== 'string' || name.length === 0) throw invalid('queue name is empty');
  if (name.length > MAX_QUEUE_NAME) throw invalid(`queue name is longer than ${MAX_QUEUE_NAME} characters`);
  if (/[{}:\s\p{Cc}*?\[\]]/u.test(name)) {
    throw invalid(`invalid queue name "${name}": it may not contain '{', '}', ':', '*', '?', '[', ']' or whitespace`);
  }
  return name;
}

export function validatePrefix(prefix: string): string {
  if (!prefix || /[{}\s\p{Cc}*?\[\]]/u.test(prefix)) throw invalid(`invalid key prefix "${prefix}"`);
  return prefix;
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
  /** Bounded stream of queue events (added, active, completed, failed, ...). */
  get events() { return `${this.base}:events`; }
  get schedulers() { return `${this.base}:schedulers`; }
  get dedup() { return `${this.base}:dedup`; }
  /** Prefix of job hashes; `job(id)` is one job. */
  get jobPrefix() { return `${this.base}:job:`; }
  job(id: string) { return `${this.base}:job:${id}`; }
  logs(id: string) { return `${this.base}:job:${id}:logs`; }
  metrics(kind: string) { return `${this.base}:metrics:${kind}`; }
  group(key: string) { return `${this.base}:group:{${key}}`; }
  /** SCAN pattern for this queue's job hashes. */
  get jobPattern() { return `${this.base}:job:*`; }
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
