/**
 * Group jobs: the `group` job option (validation, the encoding glidemq_add takes) and reading a
 * group's state hash. The scheduling itself is in lua/group.lua.
 *
 * A job added with `group: { id }` waits in that group's line. Jobs of one group start in the order
 * they were added (a retried or stalled job keeps its place); the group's limits hold across every
 * worker: `maxConcurrency` jobs at once, at most `rateMax` starts per `rateDuration` window, one
 * token of the bucket per start. Settings live on the group, not the job: the latest add that names a
 * setting sets it for the whole group (0 turns a limit off).
 */
import { connectionFor, type Client } from '../connecting/connection.js';
import { globEscape } from '../connecting/discovery.js';
import { parseDuration } from '../shared/duration.js';
import { invalid } from '../shared/errors.js';
import { type QueueKeys, validateGroupId } from '../shared/keys.js';

export interface TokenBucketOptions {
  /** Most tokens the bucket holds (a burst); 0 removes the bucket. */
  capacity: number;
  /** Tokens added per second (may be fractional, e.g. 0.5). */
  refillRate: number;
}

export interface GroupOptions {
  /** The group key. */
  id: string;
  /** Jobs of this group running at once across all workers (0 = no limit). */
  maxConcurrency?: number;
  /** Job starts allowed per rateDuration window (0 = no limit). */
  rateMax?: number;
  /** Window length for rateMax (ms or a duration like `1s`). */
  rateDuration?: number | string;
  /** Each start takes one token; tokens refill continuously. */
  tokenBucket?: TokenBucketOptions;
  /**
   * Strict order: one job at a time, and a job waiting out a retry backoff holds the group, so a
   * job never starts before the one added before it has completed or finally failed.
   */
  ordered?: boolean;
}

/** A group's state as stored in its hash. */
export interface GroupState {
  id: string;
  maxConcurrency: number;
  active: number;
  /** Job ids holding a slot, with the consumer that holds each. */
  holders: Record<string, string>;
  /** Jobs waiting in the group's line. */
  waiting: number;
  /** Delayed jobs of an ordered group holding their place in its line (each starts in its place once due). */
  delayed: number;
  rateMax: number;
  rateDuration: number;
  windowStart: number | null;
  windowCount: number;
  capacity: number;
  refillRate: number;
  tokens: number | null;
  lastRefill: number | null;
  ordered: boolean;
  /** The delayed job an ordered group waits for: a retry backoff or parked step, or the delayed job at the head of its line. */
  heldBy: string | null;
  seq: number;
}

/** Token bucket refill rates accepted, in tokens per second (lua/group.lua groupParse agrees). */
export const MIN_REFILL_RATE = 0.000001;
export const MAX_REFILL_RATE = 1_000_000;

function whole(v: unknown, what: string, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw invalid(`${what} must be a whole number from ${min} to ${Number.MAX_SAFE_INTEGER}, got ${String(v)}`);
  }
  return v;
}

/** Validates the group option; returns the JSON text glidemq_add takes ('' when there is none). */
export function encodeGroup(group: GroupOptions | undefined): string {
  if (group === undefined) return '';
  if (typeof group !== 'object' || group === null) throw invalid('group must be an object like { id: "customer-42" }');
  const known = new Set(['id', 'maxConcurrency', 'rateMax', 'rateDuration', 'tokenBucket', 'ordered']);
  for (const key of Object.keys(group)) {
    if (!known.has(key)) throw invalid(`unknown group option "${key}" (known: ${[...known].join(', ')})`);
  }
  const out: Record<string, unknown> = { id: validateGroupId(group.id) };
  if (group.maxConcurrency !== undefined) out.maxConcurrency = whole(group.maxConcurrency, 'group.maxConcurrency', 0);
  if (group.rateMax !== undefined) {
    out.rateMax = whole(group.rateMax, 'group.rateMax', 0);
    if (out.rateMax !== 0) {
      if (group.rateDuration === undefined) throw invalid('group.rateMax needs group.rateDuration (the window length)');
      const d = parseDuration(group.rateDuration, 'group.rateDuration');
      if (!Number.isSafeInteger(d) || d < 1) throw invalid(`group.rateDuration must be a whole number of ms from 1 to ${Number.MAX_SAFE_INTEGER}, got ${d}`);
      out.rateDuration = d;
    }
  } else if (group.rateDuration !== undefined) {
    throw invalid('group.rateDuration is only meaningful with group.rateMax');
  }
  if (group.tokenBucket !== undefined) {
    const tb = group.tokenBucket;
    if (typeof tb !== 'object' || tb === null) throw invalid('group.tokenBucket must be { capacity, refillRate }');
    out.capacity = whole(tb.capacity, 'group.tokenBucket.capacity', 0);
    if (out.capacity !== 0) {
      const rate = tb.refillRate;
      if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < MIN_REFILL_RATE || rate > MAX_REFILL_RATE) {
        throw invalid(
          `group.tokenBucket.refillRate must be a number of tokens per second from ${MIN_REFILL_RATE} to ${MAX_REFILL_RATE}, got ${String(rate)}`,
        );
      }
      out.refillRate = tb.refillRate;
    }
  }
  if (group.ordered !== undefined) {
    if (typeof group.ordered !== 'boolean') throw invalid('group.ordered must be true or false');
    if (group.ordered && group.maxConcurrency !== undefined && group.maxConcurrency > 1) {
      throw invalid('an ordered group runs one job at a time: group.maxConcurrency must be 1 or absent');
    }
    out.ordered = group.ordered;
  }
  return JSON.stringify(out);
}

function num(v: string | undefined, d: number): number {
  const n = v === undefined ? NaN : Number(v);
  return Number.isFinite(n) ? n : d;
}

function maybe(v: string | undefined): number | null {
  const n = v === undefined ? NaN : Number(v);
  return Number.isFinite(n) ? n : null;
}

/** Reads one group's hash and its waiting count (undefined when the group was never used). */
export async function readGroupState(client: Client, keys: QueueKeys, id: string): Promise<GroupState | undefined> {
  validateGroupId(id);
  const [h, inLine, head] = await Promise.all([
    client.hgetall(keys.group(id)),
    client.zcard(keys.groupJobs(id)),
    client.zrange(keys.groupJobs(id), '0', '0'),
  ]);
  if (!h || Object.keys(h).length === 0) return undefined;
  const holders: Record<string, string> = {};
  for (const [f, v] of Object.entries(h)) if (f.startsWith('h:')) holders[f.slice(2)] = v;
  const delayed = Math.min(inLine, Math.max(0, num(h.delayed, 0)));
  let heldBy = h.heldBy ?? null;
  if (!heldBy && delayed > 0 && head[0] && (await client.hget(keys.job(head[0]), 'state')) === 'delayed') heldBy = head[0];
  return {
    id,
    maxConcurrency: num(h.maxConcurrency, 0),
    active: num(h.active, 0),
    holders,
    waiting: inLine - delayed,
    delayed,
    rateMax: num(h.rateMax, 0),
    rateDuration: num(h.rateDuration, 0),
    windowStart: maybe(h.windowStart),
    windowCount: num(h.windowCount, 0),
    capacity: num(h.capacity, 0),
    refillRate: num(h.refillRate, 0),
    tokens: maybe(h.tokens),
    lastRefill: maybe(h.lastRefill),
    ordered: h.ordered === '1',
    heldBy,
    seq: num(h.seq, 0),
  };
}

/** The SCAN pattern of one queue's group lines, and how to read the group id back from a key. */
function groupLines(keys: QueueKeys): { pattern: string; idOf: (key: string) => string | undefined } {
  const marker = '\u0000';
  const [before, after] = keys.groupJobs(marker).split(marker);
  return {
    pattern: `${globEscape(before)}*${globEscape(after)}`,
    idOf: (key) => {
      if (!key.startsWith(before) || !key.endsWith(after) || key.length <= before.length + after.length) return undefined;
      const id = key.slice(before.length, key.length - after.length);
      try {
        return validateGroupId(id);
      } catch {
        return undefined; // a key another program wrote: no glidemq group has that id
      }
    },
  };
}

/**
 * The ids of the groups that have a line (`<base>:group:{<id>}:jobs`: waiting jobs, or delayed
 * jobs holding their place), sorted. No queue key lists them all (a full group is in neither
 * ready- nor timed-groups), so they are found by SCAN, as obliterate finds a queue's keys: it
 * reads the server's keyspace in pages and blocks nothing.
 */
export async function groupsWithLines(client: Client, keys: QueueKeys): Promise<string[]> {
  const node = connectionFor(client, keys.meta);
  if (!node) throw new Error(`no primary is known yet for queue ${keys.queue}; try again once the cluster is reachable`);
  const { pattern, idOf } = groupLines(keys);
  const found = new Set<string>();
  let cursor = '0';
  do {
    const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const key of batch) {
      const id = idOf(key);
      if (id !== undefined) found.add(id);
    }
  } while (cursor !== '0');
  return [...found].sort();
}
