/**
 * Confirmed writes (src/engine/producing/confirm.ts, README "Confirmed writes"): an add, a flow, a
 * publish or a worker's finish resolves only once WAITAOF / WAIT confirm it; a confirmation that
 * does not hold rejects with ConfirmTimeoutError naming what was reached, and its retry adds nothing
 * twice. Against real servers: one without AOF, one with AOF, and a primary with a replica.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { ConfirmTimeoutError, InvalidArgumentError, NotSupportedError } from '../../src/engine/shared/errors.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';
import { runAudit } from '../../src/audit/audit.js';

/** How many times `cmd` ran on the server (INFO commandstats). */
async function commandCalls(c: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(await c.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

async function expectRejects<T extends Error>(p: Promise<unknown>, cls: new (...a: never[]) => T): Promise<T> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(cls);
    return err as T;
  }
  throw new Error(`expected a ${cls.name}`);
}

describe('confirmed writes', function () {
  this.timeout(60000);

  describe('option checks', () => {
    const bad: [unknown, RegExp][] = [
      [{}, /asks for nothing/],
      [{ fsync: 'yes' }, /fsync must be true or false/],
      [{ replicas: -1 }, /replicas must be a whole number/],
      [{ replicas: 1.5 }, /replicas must be a whole number/],
      [{ fsync: true, timeout: 0 }, /timeout must be a whole number of ms/],
      [{ fsync: true, wait: 1 }, /confirm.wait is not a confirm option/],
      ['fsync', /confirm must be an object/],
    ];
    for (const [confirm, why] of bad) {
      it(`refuses confirm ${JSON.stringify(confirm)} on Queue, Worker, FlowProducer and Broadcast before connecting`, () => {
        const opts = { connection: 'redis://127.0.0.1:1', confirm } as never;
        expect(() => new Queue('q', opts)).to.throw(InvalidArgumentError, why);
        expect(() => new Worker('q', null, opts)).to.throw(InvalidArgumentError, why);
        expect(() => new FlowProducer(opts)).to.throw(InvalidArgumentError, why);
        expect(() => new Broadcast('b', opts)).to.throw(InvalidArgumentError, why);
      });
    }
  });

  describe('a server without AOF', () => {
    const server = useServer();

    it('refuses fsync at the first confirmed add, saying appendonly is off, and writes nothing', async () => {
      const q = new Queue(uniqueQueue('noaof'), { connection: server().url, confirm: { fsync: true } });
      try {
        const err = await expectRejects(q.add('j', {}), NotSupportedError);
        expect(err.message).to.match(/appendonly no/);
        expect(await q.count()).to.equal(0);
        // replicas only needs no AOF (and here times out: no replica)
        const t = await expectRejects(q.add('j', {}, { confirm: { replicas: 1, timeout: 100 } }), ConfirmTimeoutError);
        expect(t.reached).to.equal('held on 0 of 1 replica');
        const report = await runAudit({ url: server().url, cluster: false });
        const check = report.nodes[0].checks.find((c) => c.id === 'confirmed-writes')!;
        expect(check.status).to.equal('warn');
        expect(check.message).to.match(/appendonly is no: confirm fsync is refused/);
      } finally {
        await q.close();
      }
    });

    it('refuses a Worker confirming with fsync at its start, before it takes a job', async () => {
      const name = uniqueQueue('noaofw');
      const q = new Queue(name, { connection: server().url });
      const w = new Worker(name, async () => 'ok', { connection: server().url, autorun: false, confirm: { fsync: true } });
      w.on('error', () => undefined);
      try {
        await q.add('j', {});
        const err = await expectRejects(w.run(), NotSupportedError);
        expect(err.message).to.match(/appendonly no/);
        expect(await q.getWaitingCount()).to.equal(1);
      } finally {
        await w.close(true);
        await q.close();
      }
    });
  });

  describe('a server with AOF (appendfsync always: fsync is refused under everysec, see confirm-chaos)', () => {
    const server = useServer({ persistence: 'aof-always' });

    it('resolves an fsync-confirmed add with one WAITAOF, pipelined behind it', async () => {
      const q = new Queue(uniqueQueue('aof'), { connection: server().url });
      const c = server().client();
      try {
        await q.waitUntilReady();
        const before = await commandCalls(c, 'waitaof');
        const job = await q.add('j', { v: 1 }, { confirm: { fsync: true } });
        expect(await commandCalls(c, 'waitaof')).to.equal(before + 1);
        expect((await q.getJob(job.id!))?.data).to.deep.equal({ v: 1 });
        // bulk adds and flows confirm too
        await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }], { confirm: { fsync: true } });
        expect(await commandCalls(c, 'waitaof')).to.be.greaterThan(before + 1);
        expect(await q.count()).to.equal(3);
      } finally {
        c.disconnect();
        await q.close();
      }
    });

    it('rejects when n replicas are asked and none holds it, names what was reached, and a retry adds once', async () => {
      const q = new Queue(uniqueQueue('timeout'), { connection: server().url });
      const c = server().client();
      const replica = new TestServer({ persistence: 'aof-always' });
      try {
        const err = await expectRejects(q.add('j', { v: 1 }, { confirm: { fsync: true, replicas: 1, timeout: 200 } }), ConfirmTimeoutError);
        expect(err.reached).to.equal('fsynced locally, fsynced on 0 of 1 replica');
        expect(err.message).to.match(/a retry is safe/);
        expect(await q.count()).to.equal(1);
        // still no replica: the retry times out again and adds nothing
        const again = await expectRejects(err.retry!(), ConfirmTimeoutError);
        expect(again.reached).to.equal('fsynced locally, fsynced on 0 of 1 replica');
        expect(await q.count()).to.equal(1);
        // a replica arrives: the retry now holds, with the same job
        await replica.start();
        const rc = replica.client();
        await rc.replicaof('127.0.0.1', server().port);
        await waitFor(async () => /master_link_status:up/.test(await rc.info('replication')), 'the replica to sync');
        rc.disconnect();
        // (its fsync acknowledgement comes with its next ack: retried until it holds)
        const reply = await waitFor(async () => (await err.retry!().catch(() => undefined)) as (string | number)[] | undefined, 'a retry to hold');
        expect(await q.count()).to.equal(1);
        const [stored] = await q.getJobs(['waiting']);
        expect(String(reply![1])).to.equal(stored.id);
      } finally {
        await q.close();
        await replica.stop();
        await c.replicaof('NO', 'ONE').catch(() => undefined);
        c.disconnect();
      }
    });

    it('confirms a worker\'s finishes once per finish call, not once per job', async () => {
      const name = uniqueQueue('wfin');
      const q = new Queue(name, { connection: server().url });
      const c = server().client();
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const w = new Worker(name, async () => {
        await gate;
        return 'ok';
      }, { connection: server().url, concurrency: 20, blockTimeout: 1000, confirm: { fsync: true } });
      w.on('error', () => undefined);
      try {
        await q.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: 'j', data: { i } })));
        await waitFor(async () => (await q.getActiveCount()) === 20, 'twenty jobs running');
        const before = await commandCalls(c, 'waitaof');
        release();
        await waitFor(async () => (await q.getCompletedCount()) === 20, 'twenty jobs completed');
        // finishes ready together go in a few calls (finish-batch.ts), each confirmed once
        const confirms = (await commandCalls(c, 'waitaof')) - before;
        expect(confirms).to.be.at.least(1);
        expect(confirms).to.be.below(10);
      } finally {
        c.disconnect();
        await w.close(true);
        await q.close();
      }
    });

    it('confirms a manually processed job\'s finish (getNextJob, moveToCompleted) as the worker\'s own', async () => {
      const name = uniqueQueue('manual');
      const q = new Queue(name, { connection: server().url });
      const c = server().client();
      const w = new Worker(name, null, { connection: server().url, autorun: false, confirm: { fsync: true } });
      w.on('error', () => undefined);
      try {
        await q.add('j', { v: 1 });
        const token = 'manual-token';
        const job = (await w.getNextJob(token))!;
        expect(job).to.not.equal(undefined);
        const before = await commandCalls(c, 'waitaof');
        await job.moveToCompleted('done', token, false);
        expect(await commandCalls(c, 'waitaof')).to.equal(before + 1);
        expect(await q.getJobState(job.id!)).to.equal('completed');
      } finally {
        c.disconnect();
        await w.close(true);
        await q.close();
      }
    });

    it('confirms a FlowProducer flow and a Broadcast publish', async () => {
      const c = server().client();
      const f = new FlowProducer({ connection: server().url, confirm: { fsync: true } });
      const b = new Broadcast(uniqueQueue('bc'), { connection: server().url });
      try {
        const before = await commandCalls(c, 'waitaof');
        const tree = await f.add({ name: 'p', queueName: uniqueQueue('flow'), children: [{ name: 'c', queueName: uniqueQueue('flowc') }] });
        expect(tree.children).to.have.length(1);
        await b.publish('a.b', { x: 1 }, { confirm: { fsync: true } });
        expect(await commandCalls(c, 'waitaof')).to.equal(before + 2);
        expect(await b.length()).to.equal(1);
      } finally {
        c.disconnect();
        await f.close();
        await b.close();
      }
    });
  });

  describe('a primary with a replica', () => {
    const primary = useServer({ persistence: 'aof-always' });
    const replica = new TestServer({ persistence: 'aof-always' });
    before(async function () {
      this.timeout(30000);
      await replica.start();
      const rc = replica.client();
      await rc.replicaof('127.0.0.1', primary().port);
      await waitFor(async () => /master_link_status:up/.test(await rc.info('replication')), 'the replica to sync');
      rc.disconnect();
    });
    after(() => replica.stop());

    it('resolves replicas: 1 and fsync + replicas: 1 once the replica holds the job', async () => {
      const q = new Queue(uniqueQueue('repl'), { connection: primary().url, confirm: { replicas: 1 } });
      const rc = replica.client();
      try {
        const a = await q.add('a', { v: 1 });
        // confirmed: the replica has it now, no waiting
        expect(await rc.exists(q.keys.job(a.id!))).to.equal(1);
        const b = await q.add('b', { v: 2 }, { confirm: { fsync: true, replicas: 1 } });
        expect(await rc.exists(q.keys.job(b.id!))).to.equal(1);
        const t = await expectRejects(q.add('c', {}, { confirm: { replicas: 2, timeout: 100 } }), ConfirmTimeoutError);
        expect(t.reached).to.equal('held on 1 of 2 replicas');
        // the audit says what confirmed writes can count on here, and advises min-replicas-to-write
        const report = await runAudit({ url: primary().url, cluster: false });
        const checks = new Map(report.nodes[0].checks.map((c) => [c.id, c]));
        expect(checks.get('confirmed-writes')).to.include({ status: 'pass', actual: 'AOF on, 1 replica connected, WAITAOF available' });
        expect(checks.get('min-replicas-to-write')!.message).to.match(/set min-replicas-to-write 1/);
      } finally {
        rc.disconnect();
        await q.close();
      }
    });
  });
});
