/**
 * Claims carried by a lost reply (src/engine/consuming/claim-recovery.ts, lua/own-claims.lua): a worker
 * whose finish, fetch and blocking-read replies are cut takes back, once it is connected again,
 * the claims its consumer holds but it never received. The lock here is long (30 s), so stalled
 * recovery cannot be what finishes the jobs: every job completes well within it, none fails, and
 * none counts a stall.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { Ledger } from '../helpers/ledger.js';
import { uniqueQueue } from '../helpers/engine.js';

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LOCK_MS = 30000;

describe('faults: claims whose reply was lost are taken back on reconnect', function () {
  this.timeout(60000);
  const server = useServer();
  const { proxy, via, closeAfter } = useFaultProxy(server, 2000);

  const kinds: [string, string | RegExp, { priority?: number }][] = [
    ['finish and fetch replies (stream jobs)', /glidemq_(finish|fetch)/, {}],
    ['finish replies (priority jobs, claimed from a list)', /glidemq_finish/, { priority: 1 }],
    ['blocking reads', 'XREADGROUP', {}], // (a command name: matched case-insensitively)
  ];
  it('a finish whose reply was cut after it stored a retry is not lost: the resend finds the retry of its own claim', async () => {
    const name = uniqueQueue('lostretry');
    const ledger = new Ledger();
    const queue = new Queue(name, { connection: server().url });
    const worker = new Worker(
      name,
      async (job) => {
        ledger.ran(job.id);
        if (job.attemptsMade === 0) throw new Error('first attempt fails');
        return 'ok';
      },
      { connection: via(), lockDuration: LOCK_MS, blockTimeout: 300 },
    );
    const events: string[] = [];
    worker.on('error', () => undefined);
    worker.on('lost', (job, status) => events.push(`lost ${job.id} ${status}`));
    worker.on('lockLost', (id) => events.push(`lockLost ${id}`));
    worker.on('failed', (job) => events.push(`failed ${job.id}`));
    closeAfter(() => queue.close(), () => worker.close(true));
    await worker.waitUntilReady();
    // the first finish (the failure, which puts the job back and claims it again) runs on the
    // server and its reply is lost; the client sends it again on the new connection
    const cut = proxy().cutOn(/glidemq_finish/, { forward: true, replyWaitMs: 1000 });
    const job = await queue.add('j', {}, { attempts: 2 });
    ledger.added.add(job.id);
    await cut;
    await ledger.settle(queue, 20000);
    expect(ledger.runs.get(job.id), 'runs').to.equal(2);
    expect(events, 'events').to.deep.equal([`failed ${job.id}`]);
  });

  it('lost still fires for a result that was not stored (the job was removed while it ran)', async () => {
    const name = uniqueQueue('lostgone');
    const queue = new Queue(name, { connection: server().url });
    let removed!: () => void;
    const gone = new Promise<void>((r) => (removed = r));
    const worker = new Worker(name, async () => {
      await gone;
      return 'ok';
    }, { connection: via(), blockTimeout: 300 });
    const lost: string[] = [];
    worker.on('error', () => undefined);
    worker.on('lost', (job, status) => lost.push(`${job.id} ${status}`));
    closeAfter(() => queue.close(), () => worker.close(true));
    const job = await queue.add('j', {});
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'active', 'the job runs');
    await queue.client.del(queue.keys.job(job.id));
    removed();
    await waitFor(() => lost.length > 0, 'a lost event');
    expect(lost).to.deep.equal([`${job.id} missing`]);
  });

  for (const [what, pattern, opts] of kinds) {
    it(`cut ${what}: every job completes, none fails or counts a stall`, async () => {
      const name = uniqueQueue('lost');
      const ledger = new Ledger();
      const queue = new Queue(name, { connection: server().url });
      const worker = new Worker(
        name,
        async (job) => {
          ledger.ran(job.id);
          await delay(Math.random() * 3);
          return 1;
        },
        { connection: via(), concurrency: 4, lockDuration: LOCK_MS, stalledInterval: 1000, blockTimeout: 300 },
      );
      const errors: string[] = [];
      const stalled: string[] = [];
      worker.on('error', (e) => errors.push(String(e)));
      worker.on('stalled', (id: string) => stalled.push(id));
      closeAfter(() => queue.close(), () => worker.close(true));
      const started = Date.now();
      let cuts = 0;
      for (let round = 0; round < 6; round++) {
        // a blocking read needs an idle worker: add after arming, so the read is waiting
        const cut = proxy().cutOn(pattern, { forward: true, replyWaitMs: 150 });
        if (pattern === 'XREADGROUP') await delay(400);
        const added = await queue.addBulk(Array.from({ length: 40 }, (_, i) => ({ name: 'j', data: { round, i }, opts })));
        added.forEach((j) => ledger.added.add(j.id));
        if (await Promise.race([cut.then(() => true), delay(2000).then(() => false)])) cuts++;
        proxy().disarm();
        await delay(100);
      }
      await ledger.settle(queue, 20000);
      const took = Date.now() - started;
      console.log(`      ${ledger.added.size} jobs, ${cuts} cuts, ${worker.recovery.stats.adopted} claims adopted, ` +
        `${worker.recovery.stats.activated} entries activated, ${ledger.duplicates} re-runs, ${took} ms`);
      expect(cuts, 'cuts that landed').to.be.at.least(3);
      expect(took, 'the jobs finished before any lock could expire').to.be.below(LOCK_MS);
      expect(worker.recovery.stats.adopted + worker.recovery.stats.activated, 'claims taken back').to.be.at.least(1);
      expect(stalled, 'stalls').to.deep.equal([]);
      const counters = await Promise.all([...ledger.added].map((id) => queue.client.hget(queue.keys.job(id), 'stalledCount')));
      expect(counters.filter((c) => c !== null && c !== '0'), 'jobs that counted a stall').to.deep.equal([]);
      const counts = await queue.getJobCounts();
      expect(counts.failed, 'failed jobs').to.equal(0);
    });
  }
});
