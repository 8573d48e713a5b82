/**
 * Connections cut in the middle of function calls and blocking reads, over and over, while a
 * producer adds and a worker processes: both reconnect, and every job added ends completed, run
 * at least once, re-run only when a cut hit it in flight.
 */
import { expect } from 'chai';
import type { RedisOptions } from 'ioredis';
import { Queue } from '../../src/engine/queue.js';
import { Worker } from '../../src/engine/worker.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { FaultProxy } from '../helpers/proxy.js';
import { Ledger } from '../helpers/ledger.js';
import { uniqueQueue } from '../helpers/engine.js';

describe('faults: connections cut mid-call', function () {
  this.timeout(90000);
  const server = useServer();
  let proxy: FaultProxy;
  const closers: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    proxy = await new FaultProxy(server().port).start();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await proxy.stop();
  });

  function via(): RedisOptions {
    return { host: '127.0.0.1', port: proxy.port, socketTimeout: 2000 };
  }

  it('a blocking read cut while it waits is re-issued and still wakes for new jobs', async () => {
    const name = uniqueQueue('cutblock');
    const ledger = new Ledger();
    const queue = new Queue(name, { connection: via() });
    const worker = new Worker(name, async (job) => void ledger.ran(job.id), { connection: via(), blockTimeout: 1500 });
    worker.on('error', () => undefined);
    closers.push(() => queue.close(), () => worker.close(true));
    await queue.waitUntilReady();
    for (let i = 0; i < 3; i++) {
      await proxy.cutOn('XREADGROUP', { replyWaitMs: 200 });
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
