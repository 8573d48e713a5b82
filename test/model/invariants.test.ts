/**
 * The model test is only as good as its checker: each kind of damage the invariants name is made
 * by hand on a real queue and must be reported.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { useServer } from '../helpers/valkey.js';
import { invariantProblems, type ModelJob } from './invariants.js';
import { GROUPS } from './model-run.js';

describe('model invariants: the checker reports every kind of damage', function () {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  async function setup(): Promise<{ q: ReturnType<Harness['queue']>; c: Redis; jobs: Map<string, ModelJob> }> {
    const q = h.queue(uniqueQueue('inv'));
    const jobs = new Map<string, ModelJob>();
    for (const opts of [{}, { priority: 2 }, { lifo: true }, { delay: 60_000 }, { group: { id: 'ga' } }]) {
      const job = await q.add('x', {}, opts);
      jobs.set(job.id, { id: job.id, mode: 'ok', runs: 0, crashes: 0 });
    }
    return { q, c: q.client as Redis, jobs };
  }

  it('finds nothing wrong with a healthy queue', async () => {
    const { q, jobs } = await setup();
    expect(await invariantProblems(q, jobs, GROUPS)).to.deep.equal([]);
  });

  it('reports a lost job, a job in two places, a wrong state and a phantom hash', async () => {
    const { q, c, jobs } = await setup();
    await c.del(q.keys.job('1'));
    await c.zadd(q.keys.completed, 1, '2');
    await c.hset(q.keys.job('3'), 'state', 'delayed');
    await c.hset(q.keys.job('99'), 'state', 'waiting');
    const problems = (await invariantProblems(q, jobs, GROUPS)).join('\n');
    expect(problems).to.match(/job 1 .*lost: no hash/);
    expect(problems).to.match(/job 2 is in 2 places at once: prioritized, completed/);
    expect(problems).to.match(/job 3 is in lifo but its state is delayed/);
    expect(problems).to.match(/job hash 99 exists but the model never added it/);
  });

  it('reports counts that differ from the structures and a finished job that ran too often', async () => {
    const { q, c, jobs } = await setup();
    await c.incrby(q.keys.listActive, 2);
    await c.hincrby(q.keys.meta, 'groupWaiting', 1);
    await c.zrem(q.keys.prioritized, '2');
    await c.zadd(q.keys.completed, 1, '2');
    await c.hset(q.keys.job('2'), 'state', 'completed');
    jobs.get('2')!.runs = 3;
    jobs.get('2')!.crashes = 1;
    const problems = (await invariantProblems(q, jobs, GROUPS)).join('\n');
    expect(problems).to.match(/count listActive is 2 but the structures hold 0/);
    expect(problems).to.match(/meta groupWaiting is 2 but the group lists hold 1/);
    expect(problems).to.match(/job 2 \(ok\) ran 3 times with 1 crashes: at most 2 allowed/);
  });
});
