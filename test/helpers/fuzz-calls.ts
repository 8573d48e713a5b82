/**
 * The calls of the function fuzz, drawn from a seeded generator: a systematic part (every function
 * with no arguments, its valid list cut short and extended, every position of that list replaced by
 * each of the values issue 15 names, every key it may meet replaced by a key of another type) and a
 * random part (mutations of one or two positions, wrong shapes, lists of hostile values, wrong-typed
 * keys). Valid lists come from fuzz-argv.ts, the ids and entry ids they name from fuzz-state.ts.
 */
import type { LibraryFunction } from './fuzz.js';
import { anyJobId, isBroadcastFunction, TEMPLATES, validArgv } from './fuzz-argv.js';
import type { Snapshot } from './fuzz-keyspace.js';
import { MISSING_ID, SUBSCRIPTIONS, type Facts } from './fuzz-state.js';
import type { Prng } from './prng.js';

export type KeyType = 'string' | 'list' | 'set' | 'hash' | 'zset' | 'stream';
const KEY_TYPES: KeyType[] = ['string', 'list', 'set', 'hash', 'zset', 'stream'];

export interface KeyMutation {
  key: string;
  type: KeyType;
}

export interface FuzzCall {
  fn: string;
  readOnly: boolean;
  key: string;
  argv: string[];
  /** Written (replacing the key) just before the call. */
  mutation?: KeyMutation;
  /** How the call was made (for the report): valid, count, mutate, mutate2, shape, random, key, regression. */
  how: string;
}

const HUGE_DIGITS = '9'.repeat(400);
const OVER_ID = 'x'.repeat(257);
let hugeText: string | undefined;
let giantText: string | undefined;

/** Values that break parsers: non-finite, out-of-range, fractional, empty, oversized, malformed. */
const EDGE_NUMBERS = [
  '', 'nan', 'NaN', '-nan', 'inf', '-inf', 'infinity', '1e300', '-1e300', '1e309', '-1', '-0', '0', '1.5', '0.5',
  '-1.5', '0x10', ' 1', '1 ', '+1', '1e3', '9007199254740993', '18446744073709551616', HUGE_DIGITS, '10001', '2097153',
];
const EDGE_STRINGS = [
  '', ' ', 'x', 'completed', 'failed', 'active', '{', '}', '[]', '{}', '{"a":1}', '[1,2]', 'null', 'true', '"s"',
  '\u0000', 'a\nb', 'a:b', '{tag}', '*', '?', '$', '>', '0-0', '1-1', '18446744073709551615-0', '-', '+', OVER_ID,
  'count:-1', 'age:nan', 'count:', 'simple', 'debounce',
];

function huge(rng: Prng): string {
  // Oversized strings: past a payload limit now and then, past 1 MiB rarely (it costs time).
  if (rng.chance(0.05)) return (giantText ??= 'y'.repeat(1_100_000));
  return (hugeText ??= 'x'.repeat(70_000));
}

/** Ids, fences, consumers and entry ids of the keyspace, in the wrong place or for the wrong job. */
function factValue(f: Facts, rng: Prng): string {
  switch (rng.int(0, 7)) {
    case 0: return anyJobId(f, rng);
    case 1: return MISSING_ID;
    case 2: return f.consumer;
    case 3: return rng.pick(['1', '2', '3', '0', '-1']); // fences
    case 4: return rng.pick([...f.messages, '0-0']);
    case 5: return rng.pick([...SUBSCRIPTIONS, 'subZ']);
    case 6: return rng.pick(f.streamEntries.map((e) => e[0]).concat('0-0'));
    default: return rng.pick(f.schedulers.map((s) => s[0]).concat('fz-none'));
  }
}

export function hostile(f: Facts, rng: Prng): string {
  const r = rng.next();
  if (r < 0.45) return rng.pick(EDGE_NUMBERS);
  if (r < 0.75) return rng.pick(EDGE_STRINGS);
  if (r < 0.95) return factValue(f, rng);
  return huge(rng);
}

/** A value near a numeric one (counts one off, far off, fractional, huge), else a hostile one. */
function nearby(v: string, f: Facts, rng: Prng): string {
  const n = Number(v);
  if (v === '' || !Number.isFinite(n) || rng.chance(0.4)) return hostile(f, rng);
  return String(rng.pick([n + 1, n - 1, -n - 1, n * 1000 + 7, n + 0.5, 2 ** 53 + 2, n * 10 ** 20]));
}

function mutateOne(argv: string[], f: Facts, rng: Prng): string[] {
  if (argv.length === 0) return [hostile(f, rng)];
  const out = [...argv];
  const i = rng.int(0, out.length - 1);
  out[i] = nearby(out[i], f, rng);
  return out;
}

/** Wrong shapes of a valid list: cut short, extended, one argument dropped or repeated. */
function reshape(argv: string[], f: Facts, rng: Prng): string[] {
  const n = argv.length;
  switch (rng.int(0, 5)) {
    case 0: return argv.slice(0, rng.int(0, Math.max(0, n - 1)));
    case 1: return [...argv, ...Array.from({ length: rng.int(1, 4) }, () => hostile(f, rng))];
    case 2: {
      const i = rng.int(0, Math.max(0, n - 1));
      return [...argv.slice(0, i), ...argv.slice(i + 1)];
    }
    case 3: {
      const i = rng.int(0, Math.max(0, n - 1));
      return [...argv.slice(0, i), ...argv.slice(i, i + 1), ...argv.slice(i)];
    }
    case 4: return [...argv, ...argv.slice(Math.floor(n / 2))]; // a partial group repeated
    default: return [];
  }
}

/**
 * The keys a call of the function may meet, to be replaced by a key of another type: the queue's
 * (or broadcast's) fixed structures, the keys of jobs in each state, and every key of its hash tag
 * the keyspace holds (so a structure added later is covered too). Value: the type glidemq keeps
 * there ('' when not known: any type but the current one is wrong).
 */
export function keyTargets(f: Facts, base: Snapshot, broadcast: boolean): Map<string, string> {
  const t = new Map<string, string>();
  if (broadcast) {
    const b = f.broadcast;
    t.set(b.meta, 'hash').set(b.stream, 'stream');
    for (const s of [...SUBSCRIPTIONS, 'subC']) t.set(b.sub(s), 'hash').set(b.retry(s), 'zset').set(b.dead(s), 'stream');
  } else {
    const q = f.queue;
    const fixed: [string, string][] = [
      [q.meta, 'hash'], [q.id, 'string'], [q.stream, 'stream'], [q.wake, 'stream'], [q.scheduled, 'zset'],
      [q.prioritized, 'zset'], [q.lifo, 'list'], [q.listActiveIds, 'set'], [q.listActive, 'string'], [q.completed, 'zset'],
      [q.failed, 'zset'], [q.events, 'stream'], [q.schedulers, 'hash'], [q.dedup, 'hash'], [q.readyGroups, 'zset'],
      [q.timedGroups, 'zset'], [q.metrics('completed'), 'hash'], [q.metrics('failed'), 'hash'], [q.metrics('time'), 'hash'],
      [q.metrics('minutes'), 'zset'], [q.workers, 'hash'], [q.workersExpiry, 'zset'],
    ];
    for (const [k, type] of fixed) t.set(k, type);
    for (const g of [...f.groups, 'g9']) t.set(q.group(g), 'hash').set(q.groupJobs(g), 'zset');
    for (const ids of f.byState.values()) for (const id of ids.slice(0, 2)) t.set(q.job(id), 'hash');
    for (const j of f.active) t.set(q.job(j.id), 'hash').set(q.logs(j.id), 'list');
    for (const id of ['fz-custom-1', MISSING_ID]) t.set(q.job(id), 'hash');
  }
  const tag = broadcast ? `{${f.broadcast.broadcast}}` : `{${f.queue.queue}}`;
  for (const [k, img] of base) {
    if (k.includes(tag) && !t.has(k) && (broadcast || !k.includes(':broadcast'))) t.set(k, img.type);
  }
  return t;
}

export function pickWrongType(current: string | undefined, kept: string, rng: Prng): KeyType {
  return rng.pick(KEY_TYPES.filter((t) => t !== current && t !== kept));
}

/** Everything one fuzz batch needs to make calls. */
export interface FuzzContext {
  facts: Facts;
  base: Snapshot;
  functions: LibraryFunction[];
}

function target(ctx: FuzzContext, fn: LibraryFunction): string {
  return isBroadcastFunction(fn.name) ? ctx.facts.broadcast.meta : ctx.facts.queue.meta;
}

function keyCall(ctx: FuzzContext, fn: LibraryFunction, key: string, kept: string, rng: Prng, argv: string[]): FuzzCall {
  const type = pickWrongType(ctx.base.get(key)?.type, kept, rng);
  return { fn: fn.name, readOnly: fn.readOnly, key: target(ctx, fn), argv, mutation: { key, type }, how: 'key' };
}

/** Put in every position of every valid list (the values the issue names, and an oversized one). */
const EVERY_POSITION = ['', 'nan', 'inf', '-inf', '1e300', '-1', '1.5', HUGE_DIGITS, OVER_ID];

/** Values for one position: EVERY_POSITION, one off for a number (a count that does not match). */
function positionValues(v: string, f: Facts, rng: Prng): string[] {
  const n = Number(v);
  const near = v !== '' && Number.isInteger(n) ? [String(n + 1), String(n - 1)] : [MISSING_ID];
  return [...EVERY_POSITION, ...near, nearby(v, f, rng), huge(rng)];
}

/**
 * The deterministic part of a batch: for every function, no arguments, the valid list, one short
 * and one long, every position of the valid list replaced by each value of positionValues, and
 * every key it may meet replaced once by a key of another type.
 */
export function systematicCalls(ctx: FuzzContext, rng: Prng): FuzzCall[] {
  const calls: FuzzCall[] = [];
  for (const fn of ctx.functions) {
    const make = (argv: string[], how: string): FuzzCall => ({ fn: fn.name, readOnly: fn.readOnly, key: target(ctx, fn), argv, how });
    const valid = validArgv(fn.name, ctx.facts, rng);
    calls.push(make([], 'count'), make(valid, 'valid'), make(valid.slice(0, -1), 'count'), make([...valid, hostile(ctx.facts, rng)], 'count'));
    valid.forEach((v, i) => {
      for (const value of positionValues(v, ctx.facts, rng)) {
        const argv = [...valid];
        argv[i] = value;
        calls.push(make(argv, 'mutate'));
      }
    });
    for (const [key, kept] of keyTargets(ctx.facts, ctx.base, isBroadcastFunction(fn.name))) {
      calls.push(keyCall(ctx, fn, key, kept, rng, validArgv(fn.name, ctx.facts, rng)));
    }
  }
  return calls;
}

/** One random call: a function, a way to break it, a break. */
export function randomCall(ctx: FuzzContext, rng: Prng): FuzzCall {
  const fn = rng.pick(ctx.functions);
  const f = ctx.facts;
  const valid = validArgv(fn.name, f, rng);
  const how = rng.weighted({ valid: 4, mutate: 30, mutate2: 6, shape: 20, random: 10, key: 30 });
  const make = (argv: string[]): FuzzCall => ({ fn: fn.name, readOnly: fn.readOnly, key: target(ctx, fn), argv, how });
  switch (how) {
    case 'valid': return make(valid);
    case 'mutate': return make(mutateOne(valid, f, rng));
    case 'mutate2': return make(mutateOne(mutateOne(valid, f, rng), f, rng));
    case 'shape': return make(reshape(valid, f, rng));
    case 'random': return make(Array.from({ length: rng.int(0, 8) }, () => hostile(f, rng)));
    default: {
      const targets = [...keyTargets(f, ctx.base, isBroadcastFunction(fn.name))];
      const [key, kept] = rng.pick(targets);
      return keyCall(ctx, fn, key, kept, rng, rng.chance(0.8) ? valid : mutateOne(valid, f, rng));
    }
  }
}

/** Whether the generator knows a valid list for the function (else it is fuzzed from nothing). */
export function hasTemplate(fn: string): boolean {
  return fn in TEMPLATES;
}
