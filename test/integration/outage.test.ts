/**
 * Issue 17, "A server outage shorter than lockDuration never hands a running job to a second run":
 * worker processes run long jobs (1-3 s; stream, priority, a maxConcurrency-1 group, a
 * maxConcurrency-2 group and an ordered group) while the server (appendfsync always, so nothing
 * acknowledged is lost) is SIGKILLed and restarted on its AOF after 0.5-0.9 x lockDuration, three
 * times. From the start/end lines every processor wrote (Date.now() of each process, one machine
 * clock): no job runs twice at once, none runs twice at all (every worker stayed alive), none
 * fails as stalled and every job completes, group limits hold at every instant and one-at-a-time
 * groups start in add order, no worker runs more processors than its concurrency or its
 * activeCount says. Two lanes share the outages: stalledInterval half of lockDuration, and equal to
 * it (the defaults' ratio). And a single worker whose event loop is blocked for 0.4 x lockDuration
 * keeps its jobs.
 *
 * The outage moments come from a seeded PRNG: a failure prints its seed, and GLIDEMQ_SEED=<seed>
 * replays it (as far as timing replays), plus the timelines of the jobs involved and a file with
 * the whole log. The long form (more rounds) is test/load/outage-soak.test.ts under GLIDEMQ_SOAK=1.
 */
import { seedFromEnv } from '../helpers/prng.js';
import { failureText, runBlockedLoop, runOutages, type BlockSpec, type OutageSpec } from '../helpers/outage.js';
import { TestServer } from '../helpers/valkey.js';

const LOCK = 3000;

const OUTAGE_SPEC: OutageSpec = {
  lockDuration: LOCK,
  outages: 2, // new seeds every run; test/load/outage-soak.test.ts (make soak) runs many more
  lanes: [
    { label: 'stalled-half', stalledInterval: LOCK / 2, processes: 2, concurrency: 3 },
    { label: 'stalled-equal', stalledInterval: LOCK, processes: 2, concurrency: 3 },
  ],
  mix: { stream: 14, priority: 11, one: 5, two: 5, ord: 5 },
  runMs: [1000, 3000],
  down: [0.5, 0.9],
  up: [1.0, 1.6],
};

const BLOCK_SPEC: BlockSpec = {
  lockDuration: LOCK,
  stalledInterval: 1000,
  concurrency: 2,
  jobs: 4,
  block: 0.4,
  extraMs: [200, 600],
};

describe('a server outage shorter than lockDuration', function () {
  this.timeout(150_000);
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it(`never runs a job twice at once, fails none as stalled, and keeps group limits and order (${OUTAGE_SPEC.outages} outages of 0.5-0.9 x lockDuration)`, async () => {
    const seed = seedFromEnv();
    server = await new TestServer({ persistence: 'aof-always' }).start();
    const report = await runOutages(server, seed, OUTAGE_SPEC);
    console.log(report.summary.split('\n').map((l) => `      ${l}`).join('\n'));
    if (report.problems.length > 0) throw new Error(failureText(report));
  });

  it('a single worker whose event loop is blocked for 0.4 x lockDuration keeps its jobs', async () => {
    const seed = seedFromEnv();
    server = await new TestServer().start();
    const report = await runBlockedLoop(server, seed, BLOCK_SPEC);
    console.log(report.summary.split('\n').map((l) => `      ${l}`).join('\n'));
    if (report.problems.length > 0) throw new Error(failureText(report));
  });
});
