/**
 * The long form of test/integration/outage.test.ts (issue 17), for `make soak`: with GLIDEMQ_SOAK=1,
 * rounds of the outage scenario (5 server kills per round, lockDuration 3 or 4 s, more jobs) and of
 * the blocked-event-loop scenario, new seeds for $GLIDEMQ_SOAK_MINUTES (default 10), then the totals.
 * The first round with a problem fails with its seed (GLIDEMQ_SEED=<seed> starts from it).
 * Without GLIDEMQ_SOAK=1 this file registers nothing: the short form runs in `make test`.
 */
import { expect } from 'chai';
import { failureText, runBlockedLoop, runOutages, type Totals } from '../helpers/outage.js';
import { Prng, seedFromEnv } from '../helpers/prng.js';
import { TestServer } from '../helpers/valkey.js';

const SOAK = process.env.GLIDEMQ_SOAK === '1';
const SOAK_MINUTES = Number(process.env.GLIDEMQ_SOAK_MINUTES ?? 10);

if (SOAK) {
  describe('soak: server outages shorter than lockDuration', function () {
    this.timeout(0);
    let server: TestServer | undefined;
    afterEach(async () => {
      await server?.stop();
      server = undefined;
    });

    it(`rounds of 5 outages and of a blocked event loop, new seeds for ${SOAK_MINUTES} minutes`, async () => {
      if (!(SOAK_MINUTES > 0)) throw new Error(`GLIDEMQ_SOAK_MINUTES must be a positive number, got "${process.env.GLIDEMQ_SOAK_MINUTES}"`);
      const until = Date.now() + SOAK_MINUTES * 60_000;
      const firstSeed = seedFromEnv();
      const sum: Totals = { jobs: 0, runs: 0, reRuns: 0, overlaps: 0, outages: 0, inFlightAtKills: 0, stalledEvents: 0 };
      let rounds = 0;
      for (let seed = firstSeed; Date.now() < until; seed = (seed + 1) >>> 0) {
        const L = new Prng(seed).pick([3000, 4000]);
        console.log(`    seed ${seed}: lockDuration ${L}...`);
        server = await new TestServer({ persistence: 'aof-always' }).start();
        const outages = await runOutages(server, seed, {
          lockDuration: L,
          outages: 5,
          lanes: [
            { label: 'stalled-half', stalledInterval: L / 2, processes: 2, concurrency: 3 },
            { label: 'stalled-equal', stalledInterval: L, processes: 2, concurrency: 3 },
          ],
          mix: { stream: 40, priority: 30, one: 12, two: 12, ord: 12 },
          runMs: [Math.round(L / 3), L],
          down: [0.5, 0.9],
          up: [1.0, 1.6],
        });
        console.log(outages.summary.split('\n').map((l) => `      ${l}`).join('\n'));
        if (outages.problems.length > 0) throw new Error(failureText(outages));
        await server.stop();
        server = await new TestServer().start();
        const blocked = await runBlockedLoop(server, seed, {
          lockDuration: L,
          stalledInterval: new Prng(seed + 1).pick([1000, L / 2, L]),
          concurrency: 2,
          jobs: 8,
          block: 0.4,
          extraMs: [200, 1000],
        });
        console.log(blocked.summary.split('\n').map((l) => `      ${l}`).join('\n'));
        if (blocked.problems.length > 0) throw new Error(failureText(blocked));
        await server.stop();
        server = undefined;
        for (const t of [outages.totals, blocked.totals]) for (const k of Object.keys(sum) as (keyof Totals)[]) sum[k] += t[k];
        rounds++;
      }
      console.log(`    ${rounds} rounds from seed ${firstSeed}: ${JSON.stringify(sum)}`);
      expect(rounds).to.be.greaterThan(0);
      expect(sum.reRuns + sum.overlaps).to.equal(0);
    });
  });
}
