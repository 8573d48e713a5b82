/**
 * `lost` and `lockLost` say only that a result was not stored (issue 27, bug 10). A finish whose
 * reply is cut is sent again once the worker is connected; the server answers the repeat with what
 * the first one stored, even when that first finish removed the job (removeOnComplete: true or
 * { age: 0 }), and even when the job its retry put back has since been claimed and finished again
 * by another worker. A claim that was really taken away before its finish arrived is still lost.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker, type WorkerOptions } from '../../src/engine/consuming/worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { uniqueQueue } from '../helpers/engine.js';

describe('faults: a finish sent again after its reply was cut is not reported lost', function () {
  this.timeout(60000);
  const server = useServer();
  const { proxy, via, closeAfter } = useFaultProxy(server, 2000);

  /** A worker through the proxy, whose lost, lockLost, completed and failed events are noted in `events`. */
  function proxiedWorker(name: string, processor: (job: Job) => Promise<unknown>, events: string[], opts: WorkerOptions = {}): Worker {
    const w = new Worker(name, processor, { connection: via(), blockTimeout: 300, ...opts });
    w.on('error', () => undefined);
    w.on('lost', (job: Job, status: string) => events.push(`lost ${job.id} ${status}`));
    w.on('lockLost', (id: string) => events.push(`lockLost ${id}`));
    w.on('completed', (job: Job) => events.push(`completed ${job.id}`));
    w.on('failed', (job: Job) => events.push(`failed ${job.id}`));
    closeAfter(() => w.close(true));
    return w;
  }

  for (const [label, removeOnComplete] of [
    ['removeOnComplete: true', true],
    ['removeOnComplete: { age: 0 }', { age: 0 }],
  ] as const) {
    it(`a completion that removed its job (${label}) is answered 'completed' when sent again`, async () => {
      const name = uniqueQueue('storedgone');
      const queue = new Queue(name, { connection: server().url });
      closeAfter(() => queue.close());
      const events: string[] = [];
      let runs = 0;
      const worker = proxiedWorker(name, async () => void runs++, events);
      await worker.waitUntilReady();
      const cut = proxy().cutOn(/glidemq_finish/, { forward: true, replyWaitMs: 1000 });
      const job = await queue.add('j', {}, { removeOnComplete });
      await cut;
      await waitFor(() => events.length > 0, 'the finish answered');
      // (a wrong answer would come with the first one: a short wait shows none follows)
      await new Promise((r) => setTimeout(r, 200));
      expect(await queue.getJob(job.id), 'the job was removed').to.equal(undefined);
      expect(runs, 'runs').to.equal(1);
      expect(events).to.deep.equal([`completed ${job.id}`]);
    });
  }

  it('finish batches that removed their jobs are answered with what they stored when sent again', async () => {
    const name = uniqueQueue('storedbatch');
    const queue = new Queue(name, { connection: server().url });
    closeAfter(() => queue.close());
    const events: string[] = [];
    const worker = proxiedWorker(name, async () => new Promise((r) => setTimeout(r, Math.random() * 5)), events, { concurrency: 4 });
    await worker.waitUntilReady();
    let cuts = 0;
    const ids: string[] = [];
    for (let round = 0; round < 3; round++) {
      const cut = proxy().cutOn(/glidemq_finish/, { forward: true, replyWaitMs: 1000 });
      const added = await queue.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: 'j', data: { i }, opts: { removeOnComplete: { age: 0 } } })));
      ids.push(...added.map((j) => j.id));
      await cut.then(() => cuts++);
      await waitFor(() => events.length >= ids.length, 'every job answered');
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(cuts).to.equal(3);
    expect(events.filter((e) => !e.startsWith('completed')), 'other events').to.deep.equal([]);
    expect(events.length, 'completed events').to.equal(ids.length);
  });

  for (const [label, secondOutcome] of [
    ['failed again and then completed', 'fail-then-complete'],
    ['completed and removed', 'complete-removed'],
  ] as const) {
    it(`a retry whose job another worker has since ${label} is answered with the retry, not lost`, async () => {
      const name = uniqueQueue('storedretry');
      const queue = new Queue(name, { connection: server().url });
      closeAfter(() => queue.close());
      const events: string[] = [];
      const worker = proxiedWorker(
        name,
        async () => {
          throw new Error('the first attempt fails');
        },
        events,
      );
      await worker.waitUntilReady();
      // the failure is stored (a retry after a short backoff), its reply is cut, and the proxy
      // then passes nothing: the resend waits while another worker takes the job
      const cut = proxy()
        .cutOn(/glidemq_finish/, { forward: true, replyWaitMs: 1000 })
        .then(() => proxy().blackhole());
      const job = await queue.add('j', {}, {
        attempts: 3,
        backoff: { type: 'fixed', delay: 100 },
        removeOnComplete: secondOutcome === 'complete-removed',
      });
      await cut;
      const other: string[] = [];
      const direct = new Worker(
        name,
        async (j: Job) => {
          if (secondOutcome === 'fail-then-complete' && j.attemptsMade === 1) throw new Error('the second attempt fails');
          return 'ok';
        },
        { connection: server().url, blockTimeout: 300 },
      );
      direct.on('error', () => undefined);
      direct.on('completed', (j: Job) => other.push(`completed ${j.id}`));
      direct.on('failed', (j: Job) => other.push(`failed ${j.id}`));
      closeAfter(() => direct.close(true));
      await waitFor(() => other.includes(`completed ${job.id}`), 'the other worker completed the job');
      proxy().recover();
      await waitFor(() => events.length > 0, 'the resent finish answered');
      await new Promise((r) => setTimeout(r, 200));
      expect(events).to.deep.equal([`failed ${job.id}`]);
    });
  }

  it('a claim another worker took before its finish arrived is still lost', async () => {
    const name = uniqueQueue('reallylost');
    const queue = new Queue(name, { connection: server().url });
    closeAfter(() => queue.close());
    const events: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const worker = proxiedWorker(
      name,
      async () => {
        await held;
        return 'late';
      },
      events,
      { lockDuration: 500, stalledInterval: 30_000 },
    );
    await worker.waitUntilReady();
    const job = await queue.add('j', {}, { removeOnComplete: true });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'active', 'the job runs');
    // the first worker can renew nothing; the other worker's stalled check takes the job
    proxy().blackhole();
    const other: string[] = [];
    const direct = new Worker(name, async () => 'ok', { connection: server().url, blockTimeout: 300, stalledInterval: 100 });
    direct.on('error', () => undefined);
    direct.on('completed', (j: Job) => other.push(`completed ${j.id}`));
    closeAfter(() => direct.close(true));
    await waitFor(() => other.includes(`completed ${job.id}`), 'the other worker completed the job');
    proxy().recover();
    release();
    await waitFor(() => events.some((e) => e.startsWith('lost')), 'a lost event').catch((err: Error) => {
      throw new Error(`${err.message} (events: ${events.join(', ') || 'none'})`);
    });
    expect(events.filter((e) => e.startsWith('lost') || e.startsWith('completed'))).to.deep.equal([`lost ${job.id} missing`]);
  });
});
