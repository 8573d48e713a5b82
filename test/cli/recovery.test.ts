/** `glidemq pel`, `reclaim`, `heal` through the real bin/glidemq: output, --json shapes, exit codes. */
import { expect } from 'chai';
import type { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { claimAs, jobHash, STALLED_REASON } from '../helpers/recovery.js';
import { freePort, useServer } from '../helpers/valkey.js';

describe('glidemq pel / reclaim / heal (CLI)', function () {
  this.timeout(60_000);
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());
  const cli = (...args: string[]) => runCli([...args, '-u', server().url]);

  /**
   * A queue with one stream claim and one priority claim held by a consumer that died; their lock
   * (the claims' terms) is `lockDuration`, by default one that ran out at once.
   */
  async function abandoned(lockDuration = 0): Promise<{ q: Queue; streamId: string; prioId: string }> {
    const q = h.queue(uniqueQueue('cli'));
    const s = await q.add('send', { to: 'a' });
    const p = await q.add('urgent', {}, { priority: 1 });
    await claimAs(q, 'dead-worker', 2, { lockDuration });
    return { q, streamId: s.id, prioId: p.id };
  }

  for (const cmd of ['pel', 'reclaim', 'heal']) {
    it(`${cmd} --help shows examples`, async () => {
      const r = await runCli([cmd, '--help']);
      expect(r.code).to.equal(0);
      expect(r.stdout).to.include('Examples:');
      expect(r.stdout).to.include(`$ glidemq ${cmd}`);
    });
  }

  describe('pel', () => {
    it('--json: {"stream": [...], "list": [...]} with the documented fields', async () => {
      const { q, streamId, prioId } = await abandoned();
      const r = await cli('pel', q.name, '--json');
      expect(r.code, r.stderr).to.equal(0);
      const doc = JSON.parse(r.stdout);
      expect(Object.keys(doc).sort()).to.deep.equal(['list', 'stream']);
      expect(doc.stream).to.have.length(1);
      expect(doc.stream[0]).to.include({ jobId: streamId, name: 'send', consumer: 'dead-worker', deliveries: 1, attemptsMade: 0 });
      expect(doc.stream[0].idleMs).to.be.a('number');
      expect(doc.list).to.have.length(1);
      expect(doc.list[0]).to.include({ jobId: prioId, name: 'urgent', consumer: 'dead-worker', kind: 'priority' });
      expect(doc.list[0].idleMs).to.be.a('number');
    });

    it('prints both kinds as tables; --min-idle filters', async () => {
      const { q, streamId, prioId } = await abandoned();
      const r = await cli('pel', q.name);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.include('stream pending entries (1)');
      expect(r.stdout).to.include('priority/LIFO claims (1)');
      expect(r.stdout).to.match(new RegExp(`│ ${streamId}\\s+│ send\\s+│ dead-worker`));
      expect(r.stdout).to.match(new RegExp(`│ ${prioId}\\s+│ urgent\\s+│ priority\\s+│ dead-worker`));
      const later = await cli('pel', q.name, '--min-idle', '1h', '--json');
      expect(JSON.parse(later.stdout)).to.deep.equal({ stream: [], list: [] });
      const text = await cli('pel', q.name, '--min-idle', '1h');
      expect(text.stdout).to.include('nothing claimed');
    });

    it('an unknown queue or a bad flag is exit 2 with one line', async () => {
      const r = await cli('pel', 'no-such-queue');
      expect(r.code).to.equal(2);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.include('no-such-queue');
      const bad = await cli('pel', 'x', '--min-idle', 'soon');
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.include('--min-idle');
    });
  });

  describe('reclaim', () => {
    it('--dry-run lists the candidates and changes nothing', async () => {
      const { q, streamId, prioId } = await abandoned();
      const r = await cli('reclaim', q.name, '--min-idle', '0', '--dry-run', '--json');
      expect(r.code, r.stderr).to.equal(0);
      const doc = JSON.parse(r.stdout);
      expect(Object.keys(doc).sort()).to.deep.equal(['consumersRemoved', 'failed', 'redispatched', 'returned']);
      expect(doc.redispatched.sort()).to.deep.equal([streamId, prioId].sort());
      expect(doc.failed).to.deep.equal([]);
      expect((await jobHash(q, streamId)).state).to.equal('active');
      expect((await jobHash(q, prioId)).state).to.equal('active');
      const text = await cli('reclaim', q.name, '--min-idle', '0', '--dry-run');
      expect(text.stdout).to.include('would redispatch 2 jobs');
    });

    it('redispatches stalled claims by their own locks (--min-idle: claims with none); past their maxStalledCount they fail', async () => {
      const { q, streamId, prioId } = await abandoned(3_600_000); // a dead worker with a 1 h lock
      const nothing = { redispatched: [], failed: [], returned: [], consumersRemoved: 0 };
      const fresh = await cli('reclaim', q.name, '--json');
      expect(JSON.parse(fresh.stdout)).to.deep.equal(nothing);
      // an operator's --min-idle does not override the lock a claim was made under
      const early = await cli('reclaim', q.name, '--min-idle', '0', '--json');
      expect(JSON.parse(early.stdout)).to.deep.equal(nothing);
      // claims that carry no lock (made by an older glidemq) are judged by --min-idle
      for (const id of [streamId, prioId]) await q.client.hdel(q.keys.job(id), 'terms');
      const r = await cli('reclaim', q.name, '--min-idle', '0', '--json');
      expect(r.code, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout).redispatched.sort()).to.deep.equal([streamId, prioId].sort());
      expect((await jobHash(q, streamId))).to.include({ state: 'waiting', stalledCount: '1' });
      expect((await jobHash(q, prioId))).to.include({ state: 'prioritized', stalledCount: '1' });
      await claimAs(q, 'dead-again', 2, { lockDuration: 0, maxStalledCount: 1 });
      const text = await cli('reclaim', q.name);
      expect(text.code).to.equal(0);
      expect(text.stdout).to.match(/failed 2 jobs \(stalled more than their maxStalledCount\)/);
      expect((await jobHash(q, streamId))).to.include({ state: 'failed', failedReason: STALLED_REASON });
      // the reclaim consumer the command used is gone again
      const names = ((await q.client.xinfo('CONSUMERS', q.keys.stream, 'workers')) as unknown[][]).map((c) => String(c[1]));
      expect(names.some((n) => n.startsWith('glidemq-reclaim'))).to.equal(false);
    });

    it('a paused queue: nothing reclaimed, said on stderr, exit 0', async () => {
      const { q, streamId } = await abandoned();
      await q.pause();
      const r = await cli('reclaim', q.name, '--min-idle', '0', '--json');
      expect(r.code).to.equal(0);
      expect(JSON.parse(r.stdout)).to.deep.equal({ redispatched: [], failed: [], returned: [], consumersRemoved: 0 });
      expect(r.stderr).to.include('paused');
      expect((await jobHash(q, streamId)).state).to.equal('active');
    });

    it('an unreachable server is exit 2 with one line', async () => {
      const port = await freePort();
      const r = await runCli(['reclaim', 'q', '-u', `redis://127.0.0.1:${port}`]);
      expect(r.code).to.equal(2);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.include(`127.0.0.1:${port}`);
    });
  });

  describe('heal', () => {
    it('repairs drift and says so; silent when nothing changed; --verbose reports anyway', async () => {
      const { q } = await abandoned();
      await q.client.set(q.keys.listActive, 5);
      await q.client.sadd(q.keys.listActiveIds, 'gone-1');
      const r = await cli('heal', q.name);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.include(`${q.name}:`);
      expect(r.stdout).to.include('list-active counter 5 → 1');
      expect(Number(await q.client.get(q.keys.listActive))).to.equal(1);
      const again = await cli('heal', q.name);
      expect(again.code).to.equal(0);
      expect(again.stdout).to.equal('');
      expect(again.stderr).to.equal('');
      const verbose = await cli('heal', q.name, '--verbose');
      expect(verbose.stdout).to.include(`${q.name}: ok (1 priority/LIFO claim)`);
    });

    it('--check changes nothing and exits 1 on drift, 0 without', async () => {
      const { q } = await abandoned();
      expect((await cli('heal', q.name, '--check')).code).to.equal(0);
      await q.client.sadd(q.keys.listActiveIds, 'gone-1', 'gone-2');
      await q.client.set(q.keys.listActive, 3);
      const r = await cli('heal', q.name, '--check');
      expect(r.code).to.equal(1);
      expect(r.stdout).to.include('would drop 2 members');
      expect(await q.client.scard(q.keys.listActiveIds)).to.equal(3);
      expect((await cli('heal', q.name)).code).to.equal(0);
      expect((await cli('heal', q.name, '--check')).code).to.equal(0);
    });

    it('--all --json: one object per queue under the prefix', async () => {
      const a = await abandoned();
      const b = await abandoned();
      await b.q.client.hdel(b.q.keys.meta, 'listActiveSeeded');
      const r = await cli('heal', '--all', '--json');
      expect(r.code, r.stderr).to.equal(0);
      const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
      const byQueue = new Map(lines.map((l) => [l.queue, l]));
      for (const q of [a.q, b.q]) {
        const doc = byQueue.get(q.name);
        expect(doc, q.name).to.not.equal(undefined);
        for (const key of ['queue', 'counterBefore', 'counterAfter', 'membersDropped']) expect(doc).to.have.property(key);
      }
      expect(byQueue.get(a.q.name)).to.include({ counterBefore: 1, counterAfter: 1, membersDropped: 0, drift: false });
      expect(byQueue.get(b.q.name)).to.include({ counterBefore: 1, counterAfter: 1, drift: true, reseeded: true });
      expect(await b.q.client.hget(b.q.keys.meta, 'listActiveSeeded')).to.equal('1');
    });

    it('usage errors are exit 2: no queue, names with --all, an unknown queue', async () => {
      expect((await cli('heal')).code).to.equal(2);
      expect((await cli('heal', 'x', '--all')).code).to.equal(2);
      const unknown = await cli('heal', 'no-such-queue');
      expect(unknown.code).to.equal(2);
      expect(unknown.stderr).to.include('no-such-queue');
    });
  });
});
