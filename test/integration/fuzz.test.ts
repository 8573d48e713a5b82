/**
 * The function fuzz (issue 15, part 2): every function the `glidemq` library registers — listed
 * from the server, so a new one is covered without editing this file — is called with wrong
 * argument counts, wrong types, non-finite and oversized numbers, mismatched group counts, mutated
 * valid lists and keys of the wrong type, each call from the same realistic keyspace. Every call
 * that answers an error must leave every key as it was (type, expiry and content, compared by
 * digest: see test/helpers/fuzz-keyspace.ts for why not by raw DUMP bytes) and answer
 * `ERR_<CODE> ...` (ERR_INTERNAL, the library's net for a Lua error nobody foresaw, counts as a
 * failure: it is a bug the fuzz found). Four named regressions are the cases the issue measured.
 *
 * Seeded: a failure prints GLIDEMQ_FUZZ_SEED=<n>, which replays the same calls (ids and times of
 * the rebuilt keyspace may differ). Bounded for `make test`; GLIDEMQ_SOAK=1 runs new seeds for
 * $GLIDEMQ_SOAK_MINUTES (default 10). GLIDEMQ_FUZZ_CALLS sets the random calls per batch.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import {
  CODED, FailureLog, FuzzRunner, hasTemplate, INTERNAL, loadLibraryFunctions, runFuzzBatch,
  type BatchResult, type FuzzCall, type KeyType, type LibraryFunction,
} from '../helpers/fuzz.js';
import { buildFuzzState, type ActiveJob, type Facts } from '../helpers/fuzz-state.js';
import { useServer } from '../helpers/valkey.js';

const SOAK = process.env.GLIDEMQ_SOAK === '1';
const SOAK_MINUTES = Number(process.env.GLIDEMQ_SOAK_MINUTES ?? 10);
/** Three batches (three of the four keyspace variants, see variantFor) fit `make test`'s budget. */
const BATCHES = 3;
const RANDOM_CALLS = Number(process.env.GLIDEMQ_FUZZ_CALLS ?? (SOAK ? 20_000 : 2_000));
const SHOW_GROUPS = 30;

function fuzzSeed(): number {
  const given = process.env.GLIDEMQ_FUZZ_SEED;
  if (given === undefined || given === '') return Math.floor(Math.random() * 2 ** 31);
  const n = Number(given);
  if (!Number.isInteger(n) || n < 0) throw new Error(`GLIDEMQ_FUZZ_SEED must be a whole number >= 0, got "${given}"`);
  return n >>> 0;
}

function replay(seed: number): string {
  const calls = process.env.GLIDEMQ_FUZZ_CALLS || SOAK ? `GLIDEMQ_FUZZ_CALLS=${RANDOM_CALLS} ` : '';
  return `${calls}GLIDEMQ_FUZZ_SEED=${seed} npx mocha dist/test/integration/fuzz.test.js`;
}

describe('fuzz: every library function refuses bad input with a coded error and writes nothing', function () {
  this.timeout(SOAK ? 0 : 180_000);
  const server = useServer();
  let client: Redis;
  let functions: LibraryFunction[];

  before(async () => {
    client = new Redis({ host: '127.0.0.1', port: server().port, maxRetriesPerRequest: 0, commandTimeout: 60_000 });
    functions = await loadLibraryFunctions(client);
  });
  after(() => client?.disconnect());

  /**
   * The four cases issue 15 measured, each leaving a job in no structure at all. Their argument
   * lists are the layouts without a caller clock (no `now` argument; glidemq_moveToDelayed takes
   * its run time as a timing ('at' | 'in') and ms). Each first makes the same call unbroken and
   * expects it to work, so the refusal that follows is shown to come from the one thing broken,
   * not from an argument list the function does not take.
   */
  describe('regressions: a refused call leaves the keyspace exactly as it was', () => {
    let facts: Facts;
    let runner: FuzzRunner;

    before(async function () {
      this.timeout(60_000);
      await client.flushall();
      facts = await buildFuzzState(server().url, { paused: false, globalConcurrency: 0 });
      runner = await FuzzRunner.fromCurrent(client);
    });

    function held(src: string, n = 1): ActiveJob[] {
      const jobs = facts.active.filter((j) => j.src === src);
      expect(jobs.length, `the fuzz keyspace holds ${n} active '${src}' job(s) (build warnings: ${facts.warnings.join('; ') || 'none'})`).to.be.at.least(n);
      return jobs.slice(0, n);
    }

    function call(fn: string, argv: string[], mutation?: { key: string; type: KeyType }): FuzzCall {
      return { fn, readOnly: false, key: facts.queue.meta, argv, mutation, how: 'regression' };
    }

    /** The unbroken call works and answers `expected` first. */
    async function works(c: FuzzCall, expected: unknown): Promise<void> {
      const r = await runner.run(c);
      if (r.error !== undefined) expect.fail(`control: ${c.fn} ${JSON.stringify(c.argv)} must work, got ${r.error}`);
      expect(Array.isArray(r.reply) ? r.reply[0] : r.reply, `control: ${c.fn} answers`).to.deep.equal(expected);
      await runner.reset();
    }

    async function refusedUnchanged(c: FuzzCall): Promise<void> {
      const r = await runner.run(c);
      expect(r.error, `${c.fn} must refuse the call`).to.be.a('string');
      expect(r.error).to.match(CODED);
      expect(r.error).not.to.match(INTERNAL);
      expect(r.failures.flatMap((f) => f.changed), 'keys the refused call changed').to.deep.equal([]);
      await runner.reset();
    }

    it('glidemq_finish failing a job while the queue\'s :failed key is a string', async () => {
      const [j] = held('s');
      const argv = [j.id, j.fence, facts.consumer, 'failed', 'boom', '-1', '0', '', '5', '0', '30000', '1'];
      await works(call('glidemq_finish', argv), 'failed');
      await refusedUnchanged(call('glidemq_finish', argv, { key: facts.queue.failed, type: 'string' }));
    });

    it('glidemq_promote with :stream of the wrong type', async () => {
      expect(facts.byState.get('delayed')?.length ?? 0, 'delayed jobs in the keyspace').to.be.above(0);
      await works(call('glidemq_promote', ['1000']), 1); // the job added with a 1 ms delay
      await refusedUnchanged(call('glidemq_promote', ['1000'], { key: facts.queue.stream, type: 'string' }));
    });

    it('glidemq_moveToDelayed with run-at nan', async () => {
      const [j] = held('s');
      const park = (ms: string) => call('glidemq_moveToDelayed', [j.id, j.fence, facts.consumer, 'at', ms, '']);
      await works(park(String(Date.now() + 3_600_000)), 'delayed');
      await refusedUnchanged(park('nan'));
    });

    it('glidemq_finishMany with a short second group', async () => {
      const [a, b] = held('p', 2);
      const head = [facts.consumer, '2', '0', '0', '', '30000', '1'];
      const first = [a.id, a.fence, 'completed', '{"r":1}', '-1', '', '5'];
      await works(call('glidemq_finishMany', [...head, ...first, b.id, b.fence, 'completed', '{"r":2}', '-1', '', '5']), 'completed');
      await refusedUnchanged(call('glidemq_finishMany', [...head, ...first, b.id, b.fence, 'completed']));
    });
  });

  it(SOAK ? `soak: new seeds for ${SOAK_MINUTES} minutes` : `${BATCHES} seeded batches of systematic and ${RANDOM_CALLS} random calls`, async () => {
    expect(functions.length, 'functions the library registers').to.be.above(0);
    const untemplated = functions.filter((f) => !hasTemplate(f.name)).map((f) => f.name);
    if (untemplated.length) console.log(`      fuzzed from no valid argument list (add one in test/helpers/fuzz-argv.ts): ${untemplated.join(', ')}`);
    const first = fuzzSeed();
    const log = new FailureLog();
    const results: BatchResult[] = [];
    const until = Date.now() + SOAK_MINUTES * 60_000;
    for (let i = 0; SOAK ? Date.now() < until : i < BATCHES; i++) {
      const r = await runFuzzBatch(client, server().url, functions, (first + i) >>> 0, RANDOM_CALLS, log);
      results.push(r);
      console.log(
        `      seed ${r.seed} (${r.variant.paused ? 'paused' : 'running'}, globalConcurrency ${r.variant.globalConcurrency}): ` +
          `${r.calls} calls of ${functions.length} functions, ${r.errors} refused, ${r.ms} ms (build ${r.buildMs} ms); ` +
          `slowest ${r.slowest.fn} ${r.slowest.ms} ms`,
      );
      for (const w of r.warnings) console.log(`      warning: ${w}`);
    }
    if (log.total === 0) return;
    // A normal run replays from its first seed (all its batches); a soak run from the failing batch.
    const seed = SOAK ? (results.find((r) => r.failures > 0)?.seed ?? first) : first;
    expect.fail(
      `${log.total} refused calls broke the promise, in ${log.groups.size} (function, kind) groups:\n${log.describe(SHOW_GROUPS)}\n` +
        `replay: ${replay(seed)}`,
    );
  });
});
