/**
 * The function fuzz: calls every function of the `glidemq` library with broken arguments (wrong
 * counts, wrong types, non-finite and oversized numbers, mismatched group counts, mutated valid
 * lists) and with one of its keys replaced by a key of another type, and checks the one promise
 * every function makes: a call that answers an error leaves every key as it was (same type, expiry
 * and content: fuzz-keyspace.ts) and its error is a coded `ERR_<CODE> ...` one.
 *
 * Here: the library's functions as FUNCTION LIST reports them, the runner that makes one call and
 * judges it, and one batch. Elsewhere: the keyspace a batch starts from (fuzz-state.ts), valid
 * argument lists (fuzz-argv.ts), the calls (fuzz-calls.ts), the failure log (fuzz-failures.ts).
 */
import type { ChainableCommander, Redis } from 'ioredis';
import { LIBRARY_CODE, LIBRARY_NAME } from '../../src/engine/connecting/library.js';
import { randomCall, systematicCalls, type FuzzCall, type FuzzContext, type KeyMutation } from './fuzz-calls.js';
import { FailureLog, showArgv, type Failure } from './fuzz-failures.js';
import {
  diff, fingerprint, queueFingerprint, restore, snapshot, toFingerprint, writeCount, type Fingerprint, type Snapshot,
} from './fuzz-keyspace.js';
import { buildFuzzState, type Variant } from './fuzz-state.js';
import { Prng } from './prng.js';

export { FailureLog } from './fuzz-failures.js';
export { hasTemplate, type FuzzCall, type KeyType } from './fuzz-calls.js';

// ---------------------------------------------------------------- the library's functions

export interface LibraryFunction {
  name: string;
  /** Flagged no-writes: called with FCALL_RO. */
  readOnly: boolean;
}

/** Loads the library the engine ships and lists its functions (so a new one is fuzzed unasked). */
export async function loadLibraryFunctions(client: Redis): Promise<LibraryFunction[]> {
  await client.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY_CODE);
  const libs = (await client.call('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME)) as unknown[][];
  const lib = libs.map(toRecord).find((l) => l.library_name === LIBRARY_NAME);
  if (!lib) throw new Error(`FUNCTION LIST shows no library ${LIBRARY_NAME}`);
  return (lib.functions as unknown[][])
    .map(toRecord)
    .map((fn) => ({ name: String(fn.name), readOnly: (fn.flags as string[]).includes('no-writes') }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

function toRecord(list: unknown[]): Record<string, unknown> {
  const r: Record<string, unknown> = {};
  for (let i = 0; i + 1 < list.length; i += 2) r[String(list[i])] = list[i + 1];
  return r;
}

// ---------------------------------------------------------------- running and judging one call

export interface CallOutcome {
  /** The reply of a call that succeeded. */
  reply?: unknown;
  error?: string;
  failures: Failure[];
  ms: number;
}

/** `ERR_<CODE> <sentence>`: the only error shape a glidemq function may answer. */
export const CODED = /^ERR_[A-Z_]+ /;
/** The library's catch-all for a Lua error it did not foresee: coded, but a bug all the same. */
export const INTERNAL = /^ERR_INTERNAL /;

function queueWrongType(p: ChainableCommander, m: KeyMutation): void {
  p.del(m.key);
  switch (m.type) {
    case 'string': p.set(m.key, 'fuzz'); break;
    case 'list': p.rpush(m.key, 'fuzz'); break;
    case 'set': p.sadd(m.key, 'fuzz'); break;
    case 'hash': p.hset(m.key, 'fuzz', 'fuzz'); break;
    case 'zset': p.zadd(m.key, 1, 'fuzz'); break;
    case 'stream': p.xadd(m.key, '*', 'fuzz', 'fuzz'); break;
  }
}

/**
 * Makes calls against a base keyspace. The database holds the base state whenever a call starts:
 * a call that wrote (the server's write count moved) or had a key replaced for it is followed by
 * putting back the keys that differ from the base. Most calls write nothing, and for them the
 * check costs no more than the call: the write count is read in the call's own round trip.
 */
export class FuzzRunner {
  /** Keys that may differ from the base (undefined: unknown, fingerprint to find them). */
  private stale: Set<string> | undefined = new Set();
  calls = 0;

  constructor(
    private readonly client: Redis,
    readonly base: Snapshot,
    private readonly basePrints: Fingerprint,
  ) {}

  /** Takes the current keyspace as the base every call starts from. */
  static async fromCurrent(client: Redis): Promise<FuzzRunner> {
    const runner = new FuzzRunner(client, await snapshot(client), await fingerprint(client));
    await runner.reset();
    return runner;
  }

  /** Restores the whole base and checks the restore is faithful. */
  async reset(): Promise<void> {
    await restore(this.client, this.base);
    const back = diff(this.basePrints, await fingerprint(this.client));
    if (back.length > 0) throw new Error(`a restored keyspace differs from its snapshot: ${back.slice(0, 5).join(', ')}`);
    this.stale = new Set();
  }

  /** Puts back what differs from the base. */
  private async repair(): Promise<void> {
    let keys = this.stale;
    if (!keys) {
      const now = await fingerprint(this.client);
      keys = new Set();
      for (const [k, v] of this.basePrints) if (now.get(k) !== v) keys.add(k);
      for (const k of now.keys()) if (!this.basePrints.has(k)) keys.add(k);
    }
    if (keys.size > 0) await restore(this.client, this.base, keys);
    this.stale = new Set();
  }

  async run(call: FuzzCall): Promise<CallOutcome> {
    if (this.stale?.size !== 0) await this.repair();
    this.calls++;
    let before = this.basePrints;
    const p = this.client.pipeline();
    if (call.mutation) {
      queueWrongType(p, call.mutation);
      queueFingerprint(p, [call.mutation.key]);
    }
    p.call('INFO', 'persistence');
    p.call(call.readOnly ? 'FCALL_RO' : 'FCALL', call.fn, 1, call.key, ...call.argv);
    p.call('INFO', 'persistence');
    const started = Date.now();
    const r = (await p.exec()) ?? [];
    const ms = Date.now() - started;
    const [[, infoBefore], [err, reply], [, infoAfter]] = r.slice(-3);
    if (call.mutation) {
      this.stale = new Set([call.mutation.key]);
      before = new Map([...this.basePrints, ...toFingerprint(r[r.length - 4][1] as string[])]);
    }
    if (err && !(err instanceof Error && err.name === 'ReplyError')) throw fatal(call, err);
    const wrote = writeCount(String(infoAfter)) !== writeCount(String(infoBefore));
    if (wrote) this.stale = undefined;
    if (!err) return { reply, failures: [], ms };
    const error = err.message;
    const failures: Failure[] = [];
    if (!CODED.test(error)) failures.push({ call, kind: 'uncoded-error', error, changed: [] });
    else if (INTERNAL.test(error)) failures.push({ call, kind: 'internal-error', error, changed: [] });
    if (wrote) {
      // A write that left every key as it was (a SET of the same value) is no change.
      const changed = diff(before, await fingerprint(this.client));
      if (changed.length > 0) failures.push({ call, kind: 'keyspace-changed', error, changed });
    }
    return { error, failures, ms };
  }
}

function fatal(call: FuzzCall, err: unknown): Error {
  return new Error(`the server stopped answering after ${call.fn} ${showArgv(call.argv)}: ${String(err)}`);
}

// ---------------------------------------------------------------- one batch

export interface BatchResult {
  seed: number;
  variant: Variant;
  calls: number;
  errors: number;
  /** Failures this batch added to the log. */
  failures: number;
  ms: number;
  /** Of `ms`, building the keyspace. */
  buildMs: number;
  slowest: { fn: string; ms: number };
  warnings: string[];
}

/**
 * The queue settings a batch runs under, from its seed: consecutive seeds go through running,
 * paused, limited by globalConcurrency, and both, so a run of a few batches meets each.
 */
export function variantFor(seed: number): Variant {
  const k = seed % 4;
  return { paused: k === 1 || k === 3, globalConcurrency: k >= 2 ? 3 : 0 };
}

/**
 * One seeded batch on an emptied database: the realistic keyspace is built, snapshotted, and then
 * the systematic calls and `randomCalls` random ones are made, each from that snapshot. Failures go
 * to `log`.
 */
export async function runFuzzBatch(
  client: Redis,
  url: string,
  functions: LibraryFunction[],
  seed: number,
  randomCalls: number,
  log: FailureLog,
): Promise<BatchResult> {
  const started = Date.now();
  const logged = log.total;
  await client.flushall();
  const variant = variantFor(seed);
  const facts = await buildFuzzState(url, variant);
  const built = Date.now();
  const runner = await FuzzRunner.fromCurrent(client);
  const ctx: FuzzContext = { facts, base: runner.base, functions };
  const rng = new Prng(seed);
  let errors = 0;
  let slowest = { fn: '', ms: 0 };
  const make = async (call: FuzzCall) => {
    const r = await runner.run(call);
    if (r.error !== undefined) errors++;
    log.count(call, r.error);
    if (r.ms > slowest.ms) slowest = { fn: call.fn, ms: r.ms };
    r.failures.forEach((f) => log.add(f));
  };
  for (const call of systematicCalls(ctx, rng)) await make(call);
  for (let i = 0; i < randomCalls; i++) await make(randomCall(ctx, rng));
  return { seed, variant, calls: runner.calls, errors, failures: log.total - logged, ms: Date.now() - started, buildMs: built - started, slowest, warnings: facts.warnings };
}
