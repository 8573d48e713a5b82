/**
 * Once-only publish (issue 17): a glidemq_bcPublish call that ioredis re-sends after its reply was
 * lost is answered with the first run's reply and stores nothing more (the producer mechanism of
 * glidemq_add, lua/producers.lua). Shown on the function itself, then through the fault proxy with
 * the replies of Broadcast.publish() cut: messages stored = publishes, every publisher got the
 * stored id, and each subscription runs every message exactly once. The same cut of a publish
 * without a producer id (the call as it was before) stores the message twice: the proxy's cut is
 * the one that made every subscription run a message twice.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Broadcast, type BroadcastMessage } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker } from '../../src/engine/broadcast/broadcast-worker.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { uniqueQueue } from '../helpers/engine.js';

describe('once-only publish: a glidemq_bcPublish re-sent after its reply was lost', function () {
  this.timeout(90000);
  const server = useServer();
  const { proxy, via, closeAfter } = useFaultProxy(server, 2000);

  /** Every message of the broadcast's stream: entry id → data text. */
  async function stored(c: Redis, b: Broadcast): Promise<Map<string, string>> {
    const entries = (await c.xrange(b.keys.stream, '-', '+')) as [string, string[]][];
    return new Map(entries.map(([id, f]) => [id, f[f.indexOf('data') + 1]]));
  }

  it('answers a call number already run with its first reply, writes nothing, and drops answered replies', async () => {
    const b = new Broadcast(uniqueQueue('bconce'), { connection: server().url });
    closeAfter(() => b.close());
    await b.waitUntilReady();
    const c = b.client as Redis;
    const call = (args: (string | number)[]) => callFunction(c, 'glidemq_bcPublish', b.keys.meta, args);
    const first = (await call([0, 'p1', 1, 1, 'a.b', '{"v":1}'])) as [number, string];
    expect(first[1]).to.match(/^\d+-\d+$/);
    expect(first[0]).to.be.a('number');
    // the same call again (as ioredis re-sends it): the first reply, no second message, meta untouched
    const meta = await c.hgetall(b.keys.meta);
    expect(await call([0, 'p1', 1, 1, 'a.b', '{"v":1}'])).to.deep.equal(first);
    expect(await c.xlen(b.keys.stream)).to.equal(1);
    expect(await c.hgetall(b.keys.meta)).to.deep.equal(meta);
    // call 2 says every reply below 2 arrived: call 1's reply goes, call 2's is kept, for an hour at most
    await call([0, 'p1', 2, 2, 'a.b', '{"v":2}']);
    const pk = b.keys.producerPrefix + 'p1';
    expect(await c.hgetall(pk)).to.have.all.keys('2', 'low');
    expect(await c.pttl(pk)).to.be.within(1, 3600000);
    // another producer's call 1 is its own; a call without a producer is not remembered
    await call([0, 'p2', 1, 1, 'a.b', '{"v":3}']);
    await call([0, '', 0, 0, 'a.b', '{"v":4}']);
    expect([...(await stored(c, b)).values()]).to.deep.equal(['{"v":1}', '{"v":2}', '{"v":3}', '{"v":4}']);
    // producer, seq and answeredBelow go together; a refusal writes nothing
    for (const args of [
      [0, 'p1', 0, 0, 'a.b', '{}'],
      [0, '', 3, 1, 'a.b', '{}'],
      [0, 'p1', 3, 4, 'a.b', '{}'],
      [0, 'p1', 3, 0, 'a.b', '{}'],
      [0, 'bad id', 3, 1, 'a.b', '{}'],
    ]) {
      const err = await call(args).then(() => undefined, (e: Error) => e);
      expect(err, JSON.stringify(args)).to.be.instanceOf(InvalidArgumentError);
      expect(err!.message).to.match(/glidemq_bcPublish: (producer)/);
    }
    expect(await c.xlen(b.keys.stream)).to.equal(4);
  });

  it('without a producer id (the call as it was) a cut reply stores the message twice', async () => {
    const b = new Broadcast(uniqueQueue('bctwice'), { connection: via() });
    const admin = new Broadcast(b.name, { connection: server().url });
    closeAfter(() => b.close(), () => admin.close());
    await b.waitUntilReady();
    const rounds = 3;
    for (let i = 0; i < rounds; i++) {
      const cut = proxy().cutOn(/glidemq_bcPublish/, { forward: true });
      await callFunction(b.client, 'glidemq_bcPublish', b.keys.meta, [0, '', 0, 0, 'a.b', JSON.stringify({ i })]);
      await cut;
    }
    const data = [...(await stored(admin.client as Redis, admin)).values()];
    console.log(`      without a producer id: ${rounds} publishes, ${proxy().stats.cuts} cuts, ${data.length} messages stored`);
    expect(proxy().stats.cuts).to.equal(rounds);
    expect(data).to.deep.equal(['{"i":0}', '{"i":0}', '{"i":1}', '{"i":1}', '{"i":2}', '{"i":2}']);
  });

  it('publish() with replies cut: one message per publish, each publisher has its id, each subscription runs it once', async () => {
    const name = uniqueQueue('bconcecut');
    const b = new Broadcast(name, { connection: via() });
    const admin = new Broadcast(name, { connection: server().url });
    closeAfter(() => b.close(), () => admin.close());
    // two subscriptions, their workers connected straight to the server
    const runs: Record<string, string[]> = { billing: [], audit: [] };
    for (const sub of Object.keys(runs)) {
      const w = new BroadcastWorker(name, sub, (m: BroadcastMessage<{ n: number }>) => void runs[sub].push(`${m.id}/${m.data.n}`), {
        connection: server().url, blockTimeout: 1000, startFrom: 'earliest', autorun: false,
      });
      w.on('error', () => undefined);
      await w.run(); // the subscription exists before the first publish
      closeAfter(() => w.close());
    }
    const publishes = 12;
    const ids: string[] = [];
    for (let n = 0; n < publishes; n++) {
      // every other publish has its reply cut: the server stores it, the client never hears, re-sends
      if (n % 2 === 0) proxy().cutOn(/glidemq_bcPublish/, { forward: true });
      ids.push(await b.publish('orders.created', { n }));
      proxy().disarm();
    }
    const cuts = proxy().stats.cuts;
    const messages = await stored(admin.client as Redis, admin);
    console.log(`      ${publishes} publishes, ${cuts} cuts, ${messages.size} messages stored`);
    expect(cuts).to.equal(publishes / 2);
    expect(new Set(ids).size, 'distinct ids handed to publishers').to.equal(publishes);
    expect(messages.size, 'messages stored').to.equal(publishes);
    ids.forEach((id, n) => expect(JSON.parse(messages.get(id) ?? 'null'), `message ${id}`).to.deep.equal({ n }));
    await waitFor(async () => (await admin.subscriptions()).every((s) => s.lag === 0 && s.pending === 0), 'both subscriptions to finish');
    const expected = ids.map((id, n) => `${id}/${n}`);
    for (const sub of Object.keys(runs)) expect(runs[sub].sort(), sub).to.deep.equal([...expected].sort());
    // a Broadcast closed with every call answered drops the replies the server kept for it
    const kept = await (admin.client as Redis).keys(`${admin.keys.stream}:producer:*`);
    expect(kept).to.have.length(1);
    await b.close();
    await waitFor(async () => (await (admin.client as Redis).exists(kept[0])) === 0, 'the kept replies to go');
  });
});
