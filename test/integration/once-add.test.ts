/**
 * Once-only adds (lua/producers.lua): a glidemq_add call that ioredis re-sends after its reply was
 * lost is answered with the first run's reply and stores nothing more. Shown on the function
 * itself, then through the fault proxy with replies of add(), addBulk() and the CLI's NDJSON
 * enqueue cut at random moments: jobs stored = distinct adds, and every caller got the stored id.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { encodeJob } from '../../src/engine/producing/options.js';
import { useServer } from '../helpers/valkey.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { uniqueQueue } from '../helpers/engine.js';
import { Prng } from '../helpers/prng.js';

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('once-only adds: a call re-sent after its reply was lost', function () {
  this.timeout(90000);
  const server = useServer();
  const { proxy, via, closeAfter } = useFaultProxy(server, 2000);

  /** Every job hash of queue `name`, as id → data text. */
  async function storedJobs(c: Redis, q: Queue): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    let cursor = '0';
    do {
      const [next, keys] = await c.scan(cursor, 'MATCH', q.keys.jobPattern, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        if (key.endsWith(':logs')) continue;
        out.set(key.slice(q.keys.jobPrefix.length), (await c.hget(key, 'data')) ?? '');
      }
    } while (cursor !== '0');
    return out;
  }

  it('answers a call number already run with its first reply, writes nothing, and drops answered replies', async () => {
    const q = new Queue(uniqueQueue('once'), { connection: server().url });
    closeAfter(() => q.close());
    await q.waitUntilReady();
    const c = q.client as Redis;
    const job = encodeJob('j', { v: 1 });
    const first = await callFunction(c, 'glidemq_add', q.keys.meta, [0, 'p1', 1, 1, 2, ...job, ...job]);
    const again = await callFunction(c, 'glidemq_add', q.keys.meta, [0, 'p1', 1, 1, 2, ...job, ...job]);
    expect(again).to.deep.equal(first);
    expect((await storedJobs(c, q)).size).to.equal(2);
    // call 2 says every reply below 2 arrived: call 1's reply goes, call 2's is kept
    await callFunction(c, 'glidemq_add', q.keys.meta, [0, 'p1', 2, 2, 1, ...job]);
    expect(await c.hgetall(q.keys.producer('p1'))).to.have.all.keys('2', 'low');
    const ttl = await c.pttl(q.keys.producer('p1'));
    expect(ttl).to.be.within(1, 3600000);
    // another producer's call 1 is its own
    await callFunction(c, 'glidemq_add', q.keys.meta, [0, 'p2', 1, 1, 1, ...job]);
    expect((await storedJobs(c, q)).size).to.equal(4);
  });

  it('add() and addBulk() with replies cut: one job per add, and each caller has its id', async () => {
    const rng = new Prng(Number(process.env.GLIDEMQ_SEED ?? Date.now() % 1e9));
    const q = new Queue(uniqueQueue('oncecut'), { connection: via() });
    const admin = new Queue(q.name, { connection: server().url });
    closeAfter(() => q.close(), () => admin.close());
    await q.waitUntilReady();
    const got = new Map<string, number>(); // id → the add's number
    let adds = 0;
    let cuts = 0;
    for (let round = 0; round < 12; round++) {
      const cut = proxy().cutOn(/glidemq_add/, { forward: true });
      // a single add, or a bulk whose chunks are pipelined (one of them is cut)
      if (rng.chance(0.5)) {
        const n = adds++;
        got.set((await q.add('j', { n })).id, n);
      } else {
        const jobs = Array.from({ length: rng.int(2, 450) }, () => ({ name: 'j', data: { n: adds++ } }));
        const added = await q.addBulk(jobs);
        added.forEach((j, i) => got.set(j.id, jobs[i].data.n));
      }
      await Promise.race([cut, delay(500)]);
      proxy().disarm();
      if (proxy().stats.cuts > cuts) cuts = proxy().stats.cuts;
    }
    const stored = await storedJobs(admin.client as Redis, admin);
    console.log(`      ${adds} adds, ${cuts} cuts, ${stored.size} jobs stored`);
    expect(cuts).to.be.at.least(6);
    expect(got.size, 'distinct ids handed to callers').to.equal(adds);
    expect(stored.size, 'jobs stored').to.equal(adds);
    for (const [id, n] of got) expect(JSON.parse(stored.get(id) ?? 'null'), `job ${id}`).to.deep.equal({ n });
    // a Queue closed with every call answered drops the replies the server kept for it
    const kept = await (admin.client as Redis).keys(`${q.keys.producerPrefix}*`);
    expect(kept).to.have.length(1);
    await q.close();
    expect(await (admin.client as Redis).exists(kept[0])).to.equal(0);
  });
});
