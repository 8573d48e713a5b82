/**
 * Dead letters on a real 3-primary cluster (README "Dead letters", lua/dead-letters.lua): the
 * dead-letter queue's keys are in another hash slot than the source queue's, so the call that
 * fails a job for good writes the dead letter into the source queue's dead-outbox, and the worker
 * relays it after the reply; a worker SIGKILLed between its acknowledged failure and the relay
 * leaves the record, which upkeep relays once it is past the grace period, once.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { relayDeadLetters } from '../../src/engine/producing/dead-letter-outbox.js';
import { useCluster, type TestCluster } from '../helpers/cluster.js';
import { claimAs, STALLED_REASON, upkeep } from '../helpers/recovery.js';
import { waitFor } from '../helpers/valkey.js';

const connection = (c: TestCluster) => ({ url: c.url, cluster: true });
const FINISHER = fileURLToPath(new URL('../helpers/dead-letter-finisher.js', import.meta.url));

/** A queue name whose slot the primary on `port` serves. */
async function queueOn(c: TestCluster, port: number, stem: string): Promise<string> {
  for (let i = 0; ; i++) {
    const name = `${stem}-${i}`;
    if ((await c.primaryForSlot(keySlot(new QueueKeys(name).meta))) === port) return name;
  }
}

describe('dead letters on a cluster: the dead-letter queue on another node', function () {
  this.timeout(120000);
  const cluster = useCluster({ nodeTimeout: 1000 });
  const closers: (() => Promise<unknown>)[] = [];
  const children: ReturnType<typeof spawn>[] = [];
  let ports: number[] = [];
  let run = 0;

  before(async () => {
    ports = (await cluster().primaries()).map((p) => p.port);
  });

  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const f of closers.splice(0).reverse()) await f().catch(() => undefined);
  });

  /** A source queue on one primary and its dead-letter queue on another. */
  const twoQueues = async () => {
    run++;
    return [await queueOn(cluster(), ports[0], `dl-src${run}`), await queueOn(cluster(), ports[1], `dl-dlq${run}`)];
  };
  const queue = (name: string, dlq?: string) => {
    const q = new Queue(name, { connection: connection(cluster()), deadLetterQueue: dlq ? { name: dlq } : undefined });
    closers.push(() => q.close());
    return q;
  };
  const worker = (name: string, fn: () => Promise<unknown>) => {
    const w = new Worker(name, fn, { connection: connection(cluster()), blockTimeout: 500, promotionInterval: 100 });
    w.on('error', () => undefined);
    closers.push(() => w.close(true));
    return w;
  };

  it("a worker's failure for good reaches the dead-letter queue in another slot through the outbox, relayed after the reply", async () => {
    const [src, dlqName] = await twoQueues();
    const q = queue(src, dlqName);
    const job = await q.add('send', { to: 'x' }, { attempts: 2 });
    worker(src, async () => {
      throw new Error('smtp down');
    });
    const letters = await waitFor(async () => {
      const l = await q.getDeadLetterJobs();
      return l.length > 0 ? l : undefined;
    }, 'the dead letter to be relayed');
    expect(letters).to.have.length(1);
    expect(letters![0].originalQueue).to.equal(src);
    expect(letters![0].originalJobId).to.equal(job.id);
    expect(letters![0].failedReason).to.equal('smtp down');
    expect(letters![0].attemptsMade).to.equal(2);
    expect(letters![0].data).to.deep.equal({ to: 'x' });
    expect(letters![0].stacktrace).to.have.length(2);
    // the outbox is empty once relayed, and the source job stays in its own failed set
    await waitFor(async () => (await q.client.hlen(q.keys.deadOutbox)) === 0, 'the outbox to be emptied');
    expect(await q.getJobState(job.id)).to.equal('failed');
  });

  it('a job failed for good by a stalled check reaches the dead-letter queue in another slot, relayed by that check', async () => {
    const [src, dlqName] = await twoQueues();
    const q = queue(src, dlqName);
    const job = await q.add('stuck', { s: 1 });
    await q.waitUntilReady();
    await claimAs(q, 'dead-worker', 1, { lockDuration: 0, maxStalledCount: 0 });
    const m = upkeep(q, { lockDuration: 0, maxStalledCount: 0 });
    await waitFor(async () => (await m.reclaimStalled('reclaimer')).failed.length > 0, 'the stalled job to fail');
    const letters = await q.getDeadLetterJobs();
    expect(letters.map((l) => l.originalJobId)).to.deep.equal([job.id]);
    expect(letters[0].failedReason).to.equal(STALLED_REASON);
    expect(await q.client.hlen(q.keys.deadOutbox)).to.equal(0);
  });

  it('a worker SIGKILLed between its acknowledged failure and the relay: upkeep relays the record past the grace period, once', async () => {
    const [src, dlqName] = await twoQueues();
    const q = queue(src, dlqName);
    const job = await q.add('bill', { n: 7 });
    const child = spawn(process.execPath, [FINISHER], {
      env: { ...process.env, GLIDEMQ_TEST_FINISHER: JSON.stringify({ url: cluster().url, queue: src }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const failed = new Promise<{ id: string; reply: unknown[] }>((resolve) => {
      createInterface({ input: child.stdout! }).on('line', (line) => resolve(JSON.parse(line)));
    });
    const report = await Promise.race([failed, new Promise<never>((_, reject) => child.once('exit', () => reject(new Error(`finisher exited: ${stderr}`))))]);
    expect(report.id).to.equal(job.id);
    expect(report.reply[0]).to.equal('failed');
    expect(report.reply[report.reply.length - 1]).to.equal('{relay}'); // the relay it never made
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    // the failure is acknowledged: the job is failed, the dead letter waits in the source's outbox
    expect(await q.getJobState(job.id)).to.equal('failed');
    expect(await q.client.hlen(q.keys.deadOutbox)).to.equal(1);
    expect(await q.getDeadLetterJobs()).to.deep.equal([]);
    // a relay that honours the grace period leaves a fresh record to its live worker
    expect(await relayDeadLetters(q.client, q.keys.meta, 60000)).to.equal(0);

    // another worker of the queue: its upkeep relays the record once it is past the grace period
    worker(src, async () => 'ok');
    const letters = await waitFor(async () => {
      const l = await q.getDeadLetterJobs();
      return l.length > 0 ? l : undefined;
    }, 'upkeep to relay the dead letter', 20000);
    expect(letters![0].originalJobId).to.equal(job.id);
    expect(letters![0].failedReason).to.equal('boom');
    expect(letters![0].stacktrace[0]).to.contain('Error: boom');
    await waitFor(async () => (await q.client.hlen(q.keys.deadOutbox)) === 0, 'the outbox to be emptied');

    // once: the same record stored again (a relay repeated after a crash) stores nothing
    const dlq = queue(dlqName);
    const [letter] = letters!;
    const record = JSON.stringify({ t: 1, q: dlqName, f: ['name', 'bill', 'data', '{}'] });
    expect(await callFunction(dlq.client, 'glidemq_storeDeadLetters', dlq.keys.meta, [1, letter.id, record])).to.equal(0);
    expect(await relayDeadLetters(q.client, q.keys.meta, 0)).to.equal(0);
    expect((await dlq.getJobCounts()).failed).to.equal(1);
  });
});
