/** The CLI against a real 3-primary / 3-replica cluster (`--cluster`, and a plain URL auto-detected). */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue.js';
import { runCli } from '../helpers/cli.js';
import { useCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';

interface AuditNode {
  address: string;
  role: string;
  checks: { id: string; status: string; actual: string }[];
}

describe('glidemq CLI on a cluster', function () {
  this.timeout(60000);
  const cluster = useCluster({ persistence: 'aof-everysec' });

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
