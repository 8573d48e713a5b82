/**
 * Connections cut in the middle of function calls and blocking reads, over and over, while a
 * producer adds and a worker processes: both reconnect, and every job added ends completed, run
 * at least once, re-run only when a cut hit it in flight.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { useFaultProxy, type CutOptions } from '../helpers/proxy.js';
import { Ledger } from '../helpers/ledger.js';
import { uniqueQueue } from '../helpers/engine.js';

// Cuts that must land per test; a round whose command does not come within 3 s is tried again.
const CUTS = Number(process.env.GLIDEMQ_CUT_ROUNDS ?? 8);

describe('faults: connections cut mid-call', function () {
  this.timeout(60000 + CUTS * 3 * 3100);
  const server = useServer();
  // a short socket timeout so dead links show quickly
  const { proxy, via, closeAfter } = useFaultProxy(server, 2000);

  // A lost reply can leave a claim nobody runs (a job a finish call fetched, entries a read
  // delivered): stalled recovery gives those back after the lock duration.
  for (const forward of [false, true]) {
    const how = forward ? 'the server runs the request and its reply is lost' : 'the request never reaches the server';
    it(`loses no job when connections are cut mid-FCALL and mid-XREADGROUP (${how})`, async () => {
      const name = uniqueQueue('cut');
      const ledger = new Ledger();
      const queue = new Queue(name, { connection: via() });
      const worker = new Worker(
        name,
        async (job) => {
          ledger.ran(job.id);
          await delay(Math.random() * 4);
          return job.id;
        },
        // short lock: a claim whose reply was lost is reclaimed quickly; many stalls allowed
        { connection: via(), concurrency: 4, lockDuration: 1000, stalledInterval: 300, blockTimeout: 250, maxStalledCount: 1000 },
      );
      worker.on('error', () => undefined);
      closeAfter(() => queue.close(), () => worker.close(true));
      let stop = false;
      const producing = ledger.produce(queue, () => stop);
      const cuts = await cutRepeatedly(CUTS, { forward });
      stop = true;
      await producing;
      await ledger.settle(queue, 45000);
      console.log(`      ${ledger.added.size} jobs, ${cuts} cuts, ${ledger.duplicates} re-runs, ${[...ledger.added].filter((id) => !ledger.runs.has(id)).length} never run`);
      expect(cuts).to.equal(CUTS);
      expect(proxy().stats.cutConnections).to.be.at.least(cuts);
      // a cut can re-run what was in flight on the worker (its 4 slots) at that moment
      ledger.expectDuplicatesWithin(cuts, 4);
    });
  }

  // Alternates FCALL and XREADGROUP cuts until `wanted` landed (a busy worker may not block on a
  // read for a while: its finish calls hand it the next jobs), giving up after 3× as many tries.
  async function cutRepeatedly(wanted: number, opts: CutOptions): Promise<number> {
    let cuts = 0;
    for (let round = 0; cuts < wanted && round < wanted * 3; round++) {
      const command = round % 2 === 0 ? 'FCALL' : 'XREADGROUP';
      const hit = await Promise.race([proxy().cutOn(command, opts).then(() => true), delay(3000).then(() => false)]);
      proxy().disarm();
      if (hit) cuts++;
      await delay(60);
    }
    return cuts;
  }


  it('a blocking read cut while it waits is re-issued and still wakes for new jobs', async () => {
    const name = uniqueQueue('cutblock');
    const ledger = new Ledger();
    const queue = new Queue(name, { connection: via() });
    const worker = new Worker(name, async (job) => void ledger.ran(job.id), { connection: via(), blockTimeout: 1500 });
    worker.on('error', () => undefined);
    closeAfter(() => queue.close(), () => worker.close(true));
    await queue.waitUntilReady();
    for (let i = 0; i < 3; i++) {
      await proxy().cutOn('XREADGROUP', { replyWaitMs: 200 });
      const id = (await queue.add('fault', { i })).id;
      ledger.added.add(id);
      await waitFor(() => ledger.runs.has(id), `job ${id} after cut ${i + 1}`, 10000);
    }
    await ledger.settle(queue);
    expect(ledger.duplicates).to.equal(0);
  });
});

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
