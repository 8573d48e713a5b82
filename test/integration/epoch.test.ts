/**
 * Stalled recovery counts no time the server was down, or not yet primary, against a claim
 * (lua/epoch.lua): a claim's idle time (the pending entries list's, a list claim's lockedAt) is kept
 * across a restart and a promotion, but its age counts only from the server's epoch.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { CONSUMER_GROUP } from '../../src/engine/shared/keys.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { uniqueQueue } from '../helpers/engine.js';
import { ownedPerTest } from '../helpers/owned.js';
import { TestServer, waitFor } from '../helpers/valkey.js';

const LOCK = 1500;

/** Claims every waiting job for consumer `w1` (a worker that then stops heartbeating). */
async function claimAll(q: Queue, n: number): Promise<string[]> {
  const r = (await callFunction(q.client, 'glidemq_fetch', q.keys.meta, ['w1', n, LOCK, 5])) as unknown[];
  return (r.slice(1) as ClaimReply[]).map((c) => decodeClaim(c).id);
}

/** One stalled-recovery round as a worker runs it (both kinds of claims): the ids redispatched. */
async function reclaim(q: Queue): Promise<string[]> {
  const s = (await callFunction(q.client, 'glidemq_reclaimStalled', q.keys.meta, ['w2', LOCK, 5, 600000, 0, '0-0', ''])) as unknown[][];
  const l = (await callFunction(q.client, 'glidemq_reclaimStalledListJobs', q.keys.meta, [LOCK, 5, 0, ''])) as unknown[][];
  return [...(s[1] ?? []), ...(l[1] ?? [])].map(String).sort();
}

describe('stalled recovery and the server epoch', function () {
  this.timeout(60000);
  const { servers, queues, clients } = ownedPerTest();

  it('a restart: claims idle longer than the lock, counting the outage, are not stalled until the server has served a lock', async () => {
    const server = await new TestServer({ persistence: 'aof-always' }).start();
    servers.push(server);
    const q = new Queue(uniqueQueue('epoch'), { connection: server.url });
    queues.push(q);
    await q.add('plain', {});
    await q.add('urgent', {}, { priority: 1 });
    const ids = (await claimAll(q, 2)).sort();
    expect(ids).to.have.length(2);
    await reclaim(q); // records the epoch of this server process
    await server.kill();
    await new Promise((r) => setTimeout(r, LOCK + 300)); // the outage: longer than the lock
    await server.start();
    await waitFor(async () => (await q.client.ping()) === 'PONG', 'the queue reconnected');
    const servedFrom = Date.now();
    // both claims are idle longer than the lock by the server's own records...
    const pel = (await q.client.xpending(q.keys.stream, CONSUMER_GROUP, 'IDLE', LOCK, '-', '+', 10)) as unknown[];
    expect(pel).to.have.length(1);
    // ...but no check stalls them until the restarted server has served for a lock
    expect(await reclaim(q)).to.deep.equal([]);
    const shown = (await callFunction(q.client, 'glidemq_listClaims', q.keys.meta, [0, 10])) as unknown[][][];
    for (const item of shown[0]) expect(Number(item[4])).to.be.below(LOCK);
    for (const item of shown[1]) expect(Number(item[3])).to.be.below(LOCK);
    // the stream and the list claims are checked by two calls, so the lock may pass between them
    const taken: string[] = [];
    let firstStall = 0;
    await waitFor(async () => {
      const r = await reclaim(q);
      if (r.length > 0 && firstStall === 0) firstStall = Date.now();
      taken.push(...r);
      return taken.length >= ids.length;
    }, 'the claims stalled one lock after the restart');
    expect(firstStall - servedFrom).to.be.at.least(LOCK - 1000); // uptime is counted in whole seconds
    expect(taken.sort()).to.deep.equal(ids);
  });

  it('a promotion: a replica made primary counts claims idle from its promotion', async () => {
    const primary = await new TestServer().start();
    servers.push(primary);
    const replica = await new TestServer({ config: [`replicaof 127.0.0.1 ${primary.port}`] }).start();
    servers.push(replica);
    const q = new Queue(uniqueQueue('epoch'), { connection: primary.url });
    queues.push(q);
    await q.add('plain', {});
    await q.add('urgent', {}, { priority: 1 });
    const ids = (await claimAll(q, 2)).sort();
    await reclaim(q); // the epoch recorded on the primary (replicated)
    await new Promise((r) => setTimeout(r, LOCK + 300)); // idle past the lock on the primary
    const rc = new Redis(replica.url);
    clients.push(rc);
    await waitFor(async () => (await rc.hget(q.keys.meta, 'epochId')) !== null, 'the replica has the epoch');
    await q.close();
    queues.pop();
    await primary.kill(); // the primary is gone; the replica is promoted
    await rc.replicaof('NO', 'ONE');
    const promoted = new Queue(q.name, { connection: replica.url });
    queues.push(promoted);
    expect(await reclaim(promoted)).to.deep.equal([]);
    // the stream claim and the list claim each stall once a lock has passed; two checks may see
    // them cross that line one after the other, so what the rounds take is gathered
    const taken: string[] = [];
    await waitFor(async () => {
      taken.push(...(await reclaim(promoted)));
      return taken.length >= ids.length;
    }, 'the claims stalled one lock after the promotion');
    expect(taken.sort()).to.deep.equal(ids);
  });

  it('a user whose ACL refuses INFO still gets stalled recovery (the age counts in full)', async () => {
    const server = await new TestServer().start();
    servers.push(server);
    const admin = new Redis(server.url);
    clients.push(admin);
    await admin.acl('SETUSER', 'noinfo', 'on', '>pw', '~*', '+@all', '-info');
    const url = `redis://noinfo:pw@127.0.0.1:${server.port}`;
    const setup = new Queue(uniqueQueue('epoch'), { connection: server.url });
    queues.push(setup);
    await setup.add('plain', {});
    const q = new Queue(setup.name, { connection: url });
    queues.push(q);
    const ids = await claimAll(q, 1);
    const taken = await waitFor(async () => {
      const r = await reclaim(q);
      return r.length > 0 ? r : undefined;
    }, 'the claim stalled');
    expect(taken).to.deep.equal(ids);
  });
});
