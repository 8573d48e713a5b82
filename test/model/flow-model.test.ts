/**
 * The flow model test: seeded random flows (trees over two queues, random failures, retries and
 * failure policies) under worker SIGKILLs and server SIGKILL + restart on an `appendfsync always`
 * AOF (flow-model-run.ts). Every parent runs only after all its dependencies settled, no job runs
 * more often than its crashes allow, every job ends as the model says, and no settlement is left
 * unrelayed. A failure prints its seed and steps; GLIDEMQ_SEED=<seed> replays that run.
 * GLIDEMQ_SOAK=1 runs new seeds for $GLIDEMQ_SOAK_MINUTES (default 10).
 */
import { expect } from 'chai';
import { uniqueQueue } from '../helpers/engine.js';
import { seedFromEnv } from '../helpers/prng.js';
import { useServer } from '../helpers/valkey.js';
import { FlowModelRun } from './flow-model-run.js';

const SOAK = process.env.GLIDEMQ_SOAK === '1';
const SOAK_MINUTES = Number(process.env.GLIDEMQ_SOAK_MINUTES ?? 10);
const SHORT_SEEDS = 2;
const SHORT_STEPS = 30;
const SOAK_STEPS = 60;

describe('flow model: random flows under crashes settle every parent once, after its children', function () {
  this.timeout(SOAK ? 0 : 300_000);
  const server = useServer({ persistence: 'aof-always' });
  const firstSeed = seedFromEnv();
  const queues = (): [string, string] => [uniqueQueue('flow-a'), uniqueQueue('flow-b')];

  if (!SOAK) {
    for (let i = 0; i < SHORT_SEEDS; i++) {
      const seed = (firstSeed + i) >>> 0;
      it(`seed ${seed}: ${SHORT_STEPS} steps, every job ends as the model says`, async () => {
        const totals = await new FlowModelRun(seed, server, queues()).run(SHORT_STEPS);
        console.log(`      seed ${seed}: ${JSON.stringify(totals)}`);
        expect(totals.flows).to.be.greaterThan(0);
      });
    }
    return;
  }

  it(`soak: new seeds of ${SOAK_STEPS} steps for ${SOAK_MINUTES} minutes`, async () => {
    const until = Date.now() + SOAK_MINUTES * 60_000;
    let runs = 0;
    for (let seed = firstSeed; Date.now() < until; seed = (seed + 1) >>> 0) {
      console.log(`    seed ${seed}...`);
      await new FlowModelRun(seed, server, queues()).run(SOAK_STEPS);
      runs++;
    }
    console.log(`    ${runs} seeds from ${firstSeed}: no problem found`);
  });
});
