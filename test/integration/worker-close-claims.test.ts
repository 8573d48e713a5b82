/**
 * A worker that closes takes no more jobs: a claim that reaches it while it closes (the reply of
 * a blocking read's activation that was on its way) is not started but given back to the queue.
 * Started, its run could outlive the close: its finish then met a closed connection, the claim
 * stayed with the gone worker, and stalled recovery ran the job a second time (the model test's
 * "job X ran 2 times with 0 crashes", seen with delayed jobs promoted as a burst ended).
 */
import { expect } from 'chai';
import type { Job } from '../../src/engine/jobs/job.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { useServer, waitFor } from '../helpers/valkey.js';

describe('a closing worker starts no claim that reaches it', function () {
  this.timeout(30000);
  const server = useServer();
  const { proxy, via, closeAfter } = useFaultProxy(server, 2000);

  it('a job whose activation reply arrives during close() is given back, not run', async () => {
    const name = uniqueQueue('closing');
    const q = new Queue(name, { connection: server().url });
    let runs = 0;
    const w = new Worker(name, async (_job: Job) => {
      runs++;
      return 'done';
    }, { connection: via(), blockTimeout: 1000 });
    w.on('error', () => undefined);
    closeAfter(() => q.close(), () => w.close(true));
    await w.waitUntilReady();
    await waitFor(async () => (await q.client.xinfo('CONSUMERS', q.keys.stream, 'workers') as unknown[]).length > 0, 'the worker to read');
    // every reply to the worker now takes 400 ms: the activation of the job added next is made on
    // the server while its reply is still on the way when close() begins
    proxy().setLatency(0, 400);
    const job = await q.add('j', {});
    await waitFor(async () => (await q.client.hget(q.keys.job(job.id), 'state')) === 'active', 'the job claimed for the worker');
    await w.close();
    const stored = await q.client.hmget(q.keys.job(job.id), 'state', 'owner');
    expect(runs, 'processor runs').to.equal(0);
    expect(stored).to.deep.equal(['waiting', null]);
  });
});
