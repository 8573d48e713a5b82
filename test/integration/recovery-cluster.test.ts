/** Stalled recovery and list-active healing on a real 3-primary cluster: every call on one slot. */
import { expect } from 'chai';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { MaintenanceSession } from '../../src/engine/administering/maintenance.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useCluster } from '../helpers/cluster.js';
import { runCli } from '../helpers/cli.js';
import { claimAs } from '../helpers/recovery.js';
import { waitFor } from '../helpers/valkey.js';

const QUEUES = Array.from({ length: 6 }, (_, i) => `rescue-${i}`);

describe('cluster: stalled recovery and heal on every primary', function () {
  this.timeout(90_000);
  const cluster = useCluster();
  const opened: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((x) => x.close()));
  });

  it('re-seeds wiped sets by SCAN inside the function, reclaims claims of a dead consumer, and a worker finishes them', async () => {
    const c = cluster();
    const conn = { url: c.url, cluster: true };
    const queues = QUEUES.map((name) => new Queue(name, { connection: conn }));
    opened.push(...queues);
    const ports = new Set<number>();
    for (const q of queues) {
      ports.add(await c.primaryForSlot(keySlot(q.keys.meta)));
      await q.add('s', {});
      await q.add('p', {}, { priority: 1 });
      await q.add('l', {}, { lifo: true });
      expect(await claimAs(q, 'dead', 3)).to.have.length(3);
      await q.client.del(q.keys.listActiveIds);
      await q.client.hdel(q.keys.meta, 'listActiveSeeded');
    }
    expect(ports.size).to.be.at.least(2); // the queues live on different primaries

    const r = await runCli(['heal', '--all', '--cluster', '--json', '-u', c.url], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).to.equal(0);
    const reports = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    for (const name of QUEUES) {
      expect(reports.find((x) => x.queue === name), name).to.include({ counterBefore: 2, counterAfter: 2, membersAdded: 2, reseeded: true });
    }

    const session = await MaintenanceSession.open(conn, 'glide');
    opened.push(session);
    for (const name of QUEUES) {
      const out = await session.queue(name, { lockDuration: 0 }).reclaim();
      expect(out.redispatched, name).to.have.length(3);
    }
    const workers = QUEUES.map((name) => new Worker(name, async () => 'ok', { connection: conn, blockTimeout: 500 }));
    opened.push(...workers);
    await waitFor(async () => (await Promise.all(queues.map((q) => q.getJobCounts()))).every((x) => x.completed === 3), 'every reclaimed job to complete');
    for (const q of queues) expect((await q.getJob('1'))!.stalledCount).to.equal(1);
  });
});
