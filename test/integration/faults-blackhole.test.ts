/**
 * A server that stops answering (the proxy black-holes every byte), added latency, and the
 * library deleted on the server while the clients are cut off: workers and producers carry on
 * once the server answers again, and every job added ends completed.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { LIBRARY_NAME } from '../../src/engine/connecting/library.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { Ledger } from '../helpers/ledger.js';
import { uniqueQueue } from '../helpers/engine.js';

describe('faults: a server that stops answering', function () {
  this.timeout(60000);
  const server = useServer();
  // a short socket timeout so dead links show quickly
  const { proxy, via, closeAfter } = useFaultProxy(server, 1000);

  function open(name: string, ledger: Ledger, concurrency = 3) {
    const queue = new Queue(name, { connection: via() });
    const worker = new Worker(
      name,
      async (job) => {
        ledger.ran(job.id);
        await new Promise((r) => setTimeout(r, 2));
        return job.id;
      },
      { connection: via(), concurrency, lockDuration: 2000, stalledInterval: 500, blockTimeout: 300, maxStalledCount: 100 },
    );
    worker.on('error', () => undefined);
    closeAfter(() => queue.close(), () => worker.close(true));
    return { queue, worker };
  }

  for (const keepZombies of [false, true]) {
    const how = keepZombies ? 'its dead connections stay open and silent' : 'its dead connections are cut';
    it(`recovers when the server answers again after a silence and ${how}`, async () => {
      const ledger = new Ledger();
      const { queue, worker } = open(uniqueQueue('bh'), ledger);
      for (let i = 0; i < 30; i++) ledger.added.add((await queue.add('fault', { i })).id);
      await ledger.settle(queue);
      await waitFor(() => worker.activeCount === 0, 'the worker to be idle');
      // The worker sits in its blocking read, the producer is mid-stream: then the server goes silent.
      proxy().blackhole();
      const late = (async () => {
        for (let i = 0; i < 30; i++) ledger.added.add((await queue.add('fault', { late: i })).id);
      })();
      await new Promise((r) => setTimeout(r, 2500));
      expect(ledger.runs.size, 'nothing passes while the server is silent').to.equal(30);
      proxy().recover({ keepZombies });
      await late;
      await ledger.settle(queue);
      expect(ledger.added.size).to.equal(60);
      expect(ledger.duplicates).to.equal(0);
    });
  }

  it('re-ensures the library deleted on the server while the clients were cut off', async () => {
    const ledger = new Ledger();
    const { queue } = open(uniqueQueue('fdel'), ledger);
    for (let i = 0; i < 20; i++) ledger.added.add((await queue.add('fault', { i })).id);
    await waitFor(() => ledger.runs.size === 20, 'first batch');
    proxy().blackhole();
    const admin = server().client();
    closeAfter(async () => void admin.disconnect());
    await admin.call('FUNCTION', 'DELETE', LIBRARY_NAME);
    // adds issued while the library is gone and the link is dead wait, then go through
    const late = (async () => {
      for (let i = 0; i < 20; i++) ledger.added.add((await queue.add('fault', { late: i })).id);
    })();
    await new Promise((r) => setTimeout(r, 1500));
    proxy().recover({ keepZombies: true });
    await late;
    await ledger.settle(queue);
    const libs = (await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME)) as unknown[];
    expect(libs).to.have.length(1);
    expect(ledger.duplicates).to.equal(0);
  });

  it('works through added latency in both directions, each job once', async () => {
    proxy().setLatency(15, 25);
    const ledger = new Ledger();
    const { queue } = open(uniqueQueue('lat'), ledger, 4);
    const jobs = await queue.addBulk(Array.from({ length: 150 }, (_, i) => ({ name: 'fault', data: { i } })));
    for (const j of jobs) ledger.added.add(j.id);
    await ledger.settle(queue);
    expect(ledger.duplicates).to.equal(0);
  });
});
