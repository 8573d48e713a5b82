/** The CLI against a real 3-primary / 3-replica cluster (`--cluster`, and a plain URL auto-detected). */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { runCli } from '../helpers/cli.js';
import { claimAs } from '../helpers/recovery.js';
import { useCluster } from '../helpers/cluster.js';
import { fixturePath } from '../helpers/fixtures.js';
import { freePort, useServer, waitFor } from '../helpers/valkey.js';

interface AuditNode {
  address: string;
  role: string;
  checks: { id: string; status: string; actual: string }[];
}

/** One queue on each primary (chosen by slot), so every command is seen on every shard. */
async function queuePerPrimary(c: ReturnType<ReturnType<typeof useCluster>>, prefix: string): Promise<string[]> {
  const picked = new Map<number, string>();
  const primaries = (await c.primaries()).length;
  for (let i = 0; picked.size < primaries; i++) {
    const name = `cli-${i}`;
    const port = await c.primaryForSlot(keySlot(new QueueKeys(name, prefix).meta));
    if (!picked.has(port)) picked.set(port, name);
  }
  return [...picked.values()];
}

describe('glidemq CLI on a cluster', function () {
  this.timeout(60000);
  const cluster = useCluster({ persistence: 'aof-everysec' });

  describe('enqueue, worker, stats, job, queues, pause/resume', function () {
    this.timeout(120000); // each command is a fresh node process

    it('runs the whole cycle with --cluster on a queue of each primary', async () => {
      const c = cluster();
      const prefix = 'clic';
      const queues = await queuePerPrimary(c, prefix);
      const g = ['--cluster', '-u', c.url, '--prefix', prefix];
      await Promise.all(
        queues.map(async (q) => {
          const one = await runCli([...g, '--json', 'enqueue', q, '{"n":0}', '--name', 'single']);
          expect(one.code, one.stderr).to.equal(0);
          expect(JSON.parse(one.stdout)).to.include({ id: '1', queue: q, name: 'single' });
          const bulk = await runCli([...g, 'enqueue', q, '--ndjson'], { input: '{"n":1}\n{"n":2}\n' });
          expect(bulk.code, bulk.stderr).to.equal(0);
          expect(bulk.stdout.trim().split('\n')).to.deep.equal(['2', '3']);
        }),
      );
      const listed = await runCli([...g, '--json', 'queues']);
      expect(listed.code, listed.stderr).to.equal(0);
      const rows = JSON.parse(listed.stdout) as { name: string; waiting: number }[];
      expect(rows.map((r) => r.name).sort()).to.deep.equal([...queues].sort());
      expect(rows.map((r) => r.waiting)).to.deep.equal([3, 3, 3]);

      expect((await runCli([...g, 'pause', queues[0]])).code).to.equal(0);
      const pausedStats = await runCli([...g, '--json', 'stats', queues[0]]);
      expect(JSON.parse(pausedStats.stdout), pausedStats.stderr).to.include({ waiting: 0, paused: 3 }); // a paused queue's jobs count under paused only
      expect((await runCli([...g, 'resume', queues[0]])).code).to.equal(0);

      const runs = await Promise.all(
        queues.map((q) =>
          runCli([...g, '--json', 'worker', fixturePath('processors', 'echo.mjs'), '--queue', q, '--exit-when-idle', '--block-timeout', '200ms'], {
            timeoutMs: 60000,
          }),
        ),
      );
      for (const [i, r] of runs.entries()) {
        expect(r.code, `worker on ${queues[i]}: ${r.stderr}`).to.equal(0);
        const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string; status: string });
        expect(lines.map((l) => l.status)).to.deep.equal(['completed', 'completed', 'completed']);
      }
      await Promise.all(
        queues.map(async (q) => {
          const st = await runCli([...g, '--json', 'stats', q]);
          expect(JSON.parse(st.stdout), `${q}: ${st.stderr}`).to.include({ waiting: 0, active: 0, completed: 3, failed: 0 });
        }),
      );
      const job = await runCli([...g, '--json', 'job', queues[2], '2']);
      expect(job.code, job.stderr).to.equal(0);
      expect(JSON.parse(job.stdout)).to.deep.include({ id: '2', state: 'completed', data: { n: 1 }, returnvalue: { echoed: { n: 1 } } });
    });

    it('finds the cluster from a plain URL (no --cluster) for enqueue, queues, stats and worker', async () => {
      const c = cluster();
      const prefix = 'clia';
      const queues = await queuePerPrimary(c, prefix);
      const g = ['-u', c.url, '--prefix', prefix];
      const added = await Promise.all(queues.map((q) => runCli([...g, 'enqueue', q, '{"auto":1}'])));
      for (const r of added) expect(r.code, r.stderr).to.equal(0);
      const listed = await runCli([...g, '--json', 'queues']);
      expect(listed.code, listed.stderr).to.equal(0);
      expect((JSON.parse(listed.stdout) as { name: string }[]).map((r) => r.name).sort()).to.deep.equal([...queues].sort());
      const w = await runCli([...g, 'worker', fixturePath('processors', 'echo.mjs'), '--queue', queues[1], '--max-jobs', '1']);
      expect(w.code, w.stderr).to.equal(0);
      const st = await runCli([...g, '--json', 'stats', queues[1]]);
      expect(JSON.parse(st.stdout), st.stderr).to.include({ waiting: 0, completed: 1 });
    });
  });

  describe('pel, reclaim, heal', function () {
    this.timeout(120000);

    it('show and reclaim the claims of a dead consumer, and heal, on a queue of each primary', async () => {
      const c = cluster();
      const prefix = 'clir';
      const queues = await queuePerPrimary(c, prefix);
      const g = ['--cluster', '-u', c.url, '--prefix', prefix];
      for (const name of queues) {
        const q = new Queue(name, { connection: { url: c.url, cluster: true }, prefix });
        try {
          await q.add('s', {});
          await q.add('p', {}, { priority: 1 });
          expect(await claimAs(q, 'dead-consumer', 2)).to.have.length(2);
        } finally {
          await q.close();
        }
      }
      await Promise.all(
        queues.map(async (name) => {
          const pel = await runCli([...g, '--json', 'pel', name]);
          expect(pel.code, pel.stderr).to.equal(0);
          const claims = JSON.parse(pel.stdout) as { stream: { jobId: string; consumer: string }[]; list: { jobId: string }[] };
          expect(claims.stream.map((x) => [x.jobId, x.consumer]), name).to.deep.equal([['1', 'dead-consumer']]);
          expect(claims.list.map((x) => x.jobId), name).to.deep.equal(['2']);

          const dry = await runCli([...g, '--json', 'reclaim', name, '--min-idle', '0', '--dry-run']);
          expect(dry.code, dry.stderr).to.equal(0);
          const r = await runCli([...g, '--json', 'reclaim', name, '--min-idle', '0']);
          expect(r.code, r.stderr).to.equal(0);
          expect((JSON.parse(r.stdout) as { redispatched: string[] }).redispatched.sort(), name).to.deep.equal(['1', '2']);
          const st = JSON.parse((await runCli([...g, '--json', 'stats', name])).stdout);
          expect(st, name).to.include({ active: 0, waiting: 1, prioritized: 1 });
        }),
      );
      const healed = await runCli([...g, '--json', 'heal', '--all', '--verbose']);
      expect(healed.code, healed.stderr).to.equal(0);
      const reports = healed.stdout.trim().split('\n').map((l) => JSON.parse(l) as { queue: string; counterAfter: number });
      expect(reports.map((x) => x.queue).sort()).to.deep.equal([...queues].sort());
      expect(reports.every((x) => x.counterAfter === 0)).to.equal(true);
      const check = await runCli([...g, 'heal', ...queues, '--check']);
      expect(check.code, check.stderr).to.equal(0);

      // obliterate walks the keys of one queue with SCAN on the primary that serves its slot.
      const gone = await runCli([...g, 'obliterate', queues[1], '--yes']);
      expect(gone.code, gone.stderr).to.equal(0);
      const port = await c.primaryForSlot(keySlot(new QueueKeys(queues[1], prefix).meta));
      const left = (await c.call(port, 'SCAN', '0', 'MATCH', `${prefix}:{${queues[1]}}:*`, 'COUNT', '10000')) as [string, string[]];
      expect(left[1]).to.deep.equal([]);
      const after = JSON.parse((await runCli([...g, '--json', 'queues'])).stdout) as { name: string }[];
      expect(after.map((r) => r.name).sort()).to.deep.equal([queues[0], queues[2]].sort());
    });
  });

  describe('flows', function () {
    this.timeout(120000);

    it('enqueue --flow, flow, jobs --state waiting-children and check stuck on a flow in one queue; a flow across slots is stored in parts and shown whole', async () => {
      const c = cluster();
      const prefix = 'clif';
      const [q, other] = await queuePerPrimary(c, prefix);
      const g = ['--cluster', '-u', c.url, '--prefix', prefix];
      const tree = { name: 'report', opts: { jobId: 'r1' }, children: [{ name: 'part', opts: { jobId: 'p1' } }, { name: 'part', opts: { jobId: 'p2' } }] };
      const added = await runCli([...g, '--json', 'enqueue', q, '--flow', '-'], { input: JSON.stringify(tree) });
      expect(added.code, added.stderr).to.equal(0);
      expect(JSON.parse(added.stdout)).to.deep.include({ id: 'r1', queue: q });
      const waiting = await runCli([...g, '--json', 'jobs', q, '--state', 'waiting-children']);
      expect(waiting.code, waiting.stderr).to.equal(0);
      expect(JSON.parse(waiting.stdout)).to.deep.include({ id: 'r1', unprocessed: 2 });
      const shown = await runCli([...g, 'flow', q, 'r1']);
      expect(shown.code, shown.stderr).to.equal(0);
      expect(shown.stdout.trim().split('\n')).to.deep.equal(['report  waiting-children (2 unprocessed)  #r1', '├─ part  waiting  #p1', '└─ part  waiting  #p2']);
      const stuck = await runCli([...g, '--json', 'check', 'stuck', q, '--older', '0']);
      expect(stuck.code, stuck.stderr).to.equal(0);
      expect(JSON.parse(stuck.stdout).queues[0].details).to.deep.include({ parentsWaiting: 1, stuckParents: 0 });
      const run = await runCli([...g, 'worker', fixturePath('processors', 'echo.mjs'), '--queue', q, '--exit-when-idle', '--block-timeout', '200ms'], { timeoutMs: 60000 });
      expect(run.code, run.stderr).to.equal(0);
      const done = JSON.parse((await runCli([...g, '--json', 'flow', q, 'r1'])).stdout);
      expect(done).to.deep.include({ state: 'completed' });
      expect(done.dependencies).to.deep.equal({ processed: 2, unprocessed: 0, ignored: 0, failed: 0 });

      const across = { name: 'top', opts: { jobId: 't1' }, children: [{ name: 'away', queueName: other, opts: { jobId: 'a1' } }] };
      const stored = await runCli([...g, 'enqueue', q, '--flow', '-'], { input: JSON.stringify(across) });
      expect(stored.code, stored.stderr).to.equal(0);
      const whole = await runCli([...g, 'flow', q, 't1']);
      expect(whole.code, whole.stderr).to.equal(0);
      expect(whole.stdout.trim().split('\n')).to.deep.equal(['top  waiting-children (1 unprocessed)  #t1', `└─ away @${other}  waiting  #a1`]);
      const port = await c.primaryForSlot(keySlot(new QueueKeys(other, prefix).meta));
      expect(await c.call(port, 'EXISTS', new QueueKeys(other, prefix).job('a1')), 'the child, in the other slot').to.equal(1);
    });
  });

  describe('audit', () => {
    it('reports every primary and replica, and passes the baseline once the library is loaded', async () => {
      const c = cluster();
      const q = new Queue('audit-seed', { connection: { url: c.url, cluster: true } });
      await q.waitUntilReady();
      await q.close();
      const r = await runCli(['--cluster', '-u', c.url, '--json', 'audit']);
      expect(r.code, r.stderr).to.equal(0);
      const doc = JSON.parse(r.stdout) as { nodes: AuditNode[]; summary: Record<string, number> };
      const expected = c.nodes.map((n) => `127.0.0.1:${n.port}`).sort();
      expect(doc.nodes.map((n) => n.address).sort()).to.deep.equal(expected);
      expect(doc.nodes.filter((n) => n.role === 'master')).to.have.length(3);
      expect(doc.nodes.filter((n) => n.role === 'replica')).to.have.length(3);
      for (const n of doc.nodes) {
        expect(n.checks.find((x) => x.id === 'function-library')?.status, `library on ${n.address}`).to.equal('pass');
        expect(n.checks.find((x) => x.id === 'replication')?.status, `replication on ${n.address}`).to.equal('pass');
      }
      expect(doc.summary.fail).to.equal(0);
    });

    it('finds the cluster from a plain URL too', async () => {
      const c = cluster();
      const r = await runCli(['-u', c.url, '--json', 'audit']);
      expect(r.code, r.stderr).to.equal(0);
      expect((JSON.parse(r.stdout) as { nodes: AuditNode[] }).nodes).to.have.length(6);
    });

    it('warns on a primary left without a replica', async () => {
      const c = cluster();
      const [lonely, other] = await c.primaries();
      const replica = await c.replicaOf(lonely.port);
      expect(replica, 'a replica of the first primary').to.be.a('number');
      // Move the replica to another primary: the first one keeps its slots but loses its copy.
      await c.call(replica!, 'CLUSTER', 'REPLICATE', other.id);
      try {
        await waitFor(async () => (await c.replicaOf(lonely.port)) === undefined && String(await c.call(lonely.port, 'INFO', 'replication')).includes('connected_slaves:0'), 'the replica to move');
        await c.waitHealthy();
        const r = await runCli(['--cluster', '-u', c.url, '--json', 'audit']);
        expect(r.code, r.stderr).to.equal(0); // a warning, not a failure
        const doc = JSON.parse(r.stdout) as { nodes: AuditNode[] };
        const node = doc.nodes.find((n) => n.address === `127.0.0.1:${lonely.port}`)!;
        const check = node.checks.find((x) => x.id === 'replication')!;
        expect(check.status).to.equal('warn');
        expect(check.actual).to.equal('0 replicas');
        const strict = await runCli(['--cluster', '-u', c.url, 'audit', '--strict']);
        expect(strict.code).to.equal(1);
        expect(strict.stdout).to.match(/no replica/);
      } finally {
        await c.call(replica!, 'CLUSTER', 'REPLICATE', lonely.id);
        await waitFor(async () => (await c.replicaOf(lonely.port)) === replica, 'the replica to come back');
        await c.waitHealthy();
      }
    });

    it('reports a killed replica as unreachable and exits 1', async () => {
      const c = cluster();
      const [primary] = await c.primaries();
      const replica = (await c.replicaOf(primary.port))!;
      await c.kill(replica);
      try {
        const r = await runCli(['--cluster', '-u', c.url, '--json', 'audit']);
        expect(r.code, r.stderr).to.equal(1);
        const doc = JSON.parse(r.stdout) as { nodes: AuditNode[] };
        expect(doc.nodes).to.have.length(6);
        const dead = doc.nodes.find((n) => n.address === `127.0.0.1:${replica}`)!;
        expect(dead.checks.map((x) => x.status)).to.deep.equal(['fail']);
      } finally {
        await c.restart(replica);
        await c.waitHealthy();
      }
    });
  });
});

describe('glidemq --cluster errors', function () {
  this.timeout(30000);
  const server = useServer();

  it('an unreachable seed: exit 2, one line naming it, no password', async () => {
    const port = await freePort();
    const r = await runCli(['--cluster', '-u', `redis://:hunter2@127.0.0.1:${port}`, 'stats', 'q']);
    expect(r.code).to.equal(2);
    expect(r.stderr.trim().split('\n')).to.have.length(1);
    expect(r.stderr).to.include(`cannot reach the cluster at 127.0.0.1:${port}`);
    expect(r.stderr).to.not.include('hunter2');
  });

  it('--cluster naming a standalone server says so', async () => {
    const r = await runCli(['--cluster', '-u', server().url, 'queues']);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/cluster support disabled: the server is not a cluster node, run without --cluster/);
  });
});

