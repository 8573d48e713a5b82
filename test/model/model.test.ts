/**
 * The model-based randomized test: seeded random sequences of adds (stream, priority, LIFO,
 * delayed, group, custom id; one at a time and in bulk), processing with retries and steps,
 * pause/resume, worker SIGKILL, server SIGKILL + restart on an `appendfsync always` AOF, reclaim and
 * heal calls, with the invariants of invariants.ts checked after every step and every outcome at
 * the end. A failure prints its seed; GLIDEMQ_SEED=<seed> replays that run.
 * Short form in the normal suite; GLIDEMQ_SOAK=1 runs new seeds for $GLIDEMQ_SOAK_MINUTES (default
 * 10) and prints the totals.
 */
import { expect } from 'chai';
import { uniqueQueue } from '../helpers/engine.js';
import { seedFromEnv } from '../helpers/prng.js';
import { useServer } from '../helpers/valkey.js';
import { emptyTotals, ModelRun, type RunTotals } from './model-run.js';

const SOAK = process.env.GLIDEMQ_SOAK === '1';
const SOAK_MINUTES = Number(process.env.GLIDEMQ_SOAK_MINUTES ?? 10);
const SHORT_SEEDS = 2; // new seeds every run; make soak runs many more
const SHORT_STEPS = 40;
const SOAK_STEPS = 60;

function add(into: RunTotals, t: RunTotals): void {
  for (const k of Object.keys(into) as (keyof RunTotals)[]) into[k] += t[k];
}

describe('model: random operations and faults keep every invariant', function () {
  this.timeout(SOAK ? 0 : 240_000);
  const server = useServer({ persistence: 'aof-always' });
  const firstSeed = seedFromEnv();

  if (!SOAK) {
    for (let i = 0; i < SHORT_SEEDS; i++) {
      const seed = (firstSeed + i) >>> 0;
      it(`seed ${seed}: ${SHORT_STEPS} steps, no job lost, none in two places, counts equal the structures`, async () => {
        const totals = await new ModelRun(seed, server, uniqueQueue('model')).run(SHORT_STEPS);
        console.log(`      seed ${seed}: ${JSON.stringify(totals)}`);
        expect(totals.lost).to.equal(0);
        expect(totals.completed + totals.failed).to.equal(totals.jobs);
      });
    }
    return;
  }

  it(`soak: new seeds of ${SOAK_STEPS} steps for ${SOAK_MINUTES} minutes`, async () => {
    const until = Date.now() + SOAK_MINUTES * 60_000;
    const sum = emptyTotals();
    let runs = 0;
    for (let seed = firstSeed; Date.now() < until; seed = (seed + 1) >>> 0) {
      console.log(`    seed ${seed}...`);
      add(sum, await new ModelRun(seed, server, uniqueQueue('model')).run(SOAK_STEPS));
      runs++;
    }
    console.log(`    ${runs} seeds from ${firstSeed}: ${JSON.stringify(sum)}`);
    expect(sum.lost).to.equal(0);
  });
});
