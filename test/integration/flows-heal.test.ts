/**
 * Lost flow settlements are drift (issue 29's gap): `glidemq heal --check` counts an outbox
 * record past its grace and a parent left in waiting-children with no dependency, and changes
 * nothing; `heal` relays and queues them; a worker's upkeep queues such a parent too (and relays
 * the record). Each lost settlement is made here by hand, as a crash or a failover would leave it.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { upkeep } from '../helpers/recovery.js';
import { runCli } from '../helpers/cli.js';

describe('flows: lost settlements are heal drift, and upkeep repairs them', function () {
  this.timeout(60000);
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());
  const queue = (label: string) => h.queue(uniqueQueue(label));

  /** A parent in `top` with one child in `side`, whose settlement is lost: the child completed, the parent's deps emptied by hand, the parent left waiting since 60 s. */
  const parentLeftWaiting = async (top: Queue, side: Queue) => {
    const tree = await h.flowProducer().add({ name: 'p', queueName: top.name, children: [{ name: 'c', queueName: side.name }] });
    const c = top.client as Redis;
    await c.srem(top.keys.deps(tree.job.id), side.keys.job(tree.children![0].job.id));
    const now = Number((await c.time())[0]) * 1000;
    await c.zadd(top.keys.waitingChildren, now - 60_000, tree.job.id);
    return tree.job.id;
  };

  it('a parent left waiting with no dependency: heal --check counts it as drift and changes nothing; heal queues it', async () => {
    const [top, side] = [queue('top'), queue('side')];
    const id = await parentLeftWaiting(top, side);
    const m = upkeep(top);
    const check = await m.heal({ check: true });
    expect([check.drift, check.parentsReleased]).to.deep.equal([true, 1]);
    expect(await top.getJobState(id)).to.equal('waiting-children');
    const cli = await runCli(['heal', top.name, '--check', '--url', server().url]);
    expect(cli.code).to.equal(1);
    expect(cli.stdout).to.match(/would queue 1 parent left waiting/);
    const healed = await m.heal();
    expect(healed.parentsReleased).to.equal(1);
    expect(await top.getJobState(id)).to.equal('waiting');
    expect((await m.heal({ check: true })).drift).to.equal(false);
  });

  it('an outbox record past its grace is drift for heal --check, and heal relays it', async () => {
    const [top, side] = [queue('top'), queue('side')];
    const tree = await h.flowProducer().add({ name: 'p', queueName: top.name, children: [{ name: 'c', queueName: side.name }] });
    const c = top.client as Redis;
    const now = Number((await c.time())[0]) * 1000;
    // as a cluster node's finish writes it, 60 s ago, and no relay since
    await c.hset(side.keys.flowOutbox, `${top.keys.job(tree.job.id)} ${side.keys.job(tree.children![0].job.id)}`, JSON.stringify({ t: now - 60_000, k: 'completed', v: '1' }));
    const m = upkeep(side);
    const check = await m.heal({ check: true });
    expect([check.drift, check.outboxRelayed]).to.deep.equal([true, 1]);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting-children');
    expect((await m.heal()).outboxRelayed).to.equal(1);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting');
  });

  it('a worker\'s upkeep queues a parent left waiting with no dependency, and it runs', async () => {
    const [top, side] = [queue('top'), queue('side')];
    const id = await parentLeftWaiting(top, side);
    h.worker(top.name, async () => 'ran', { promotionInterval: 20 });
    await waitFor(async () => (await top.getJobState(id)) === 'completed', 'the parent to run', 20000);
  });
});
