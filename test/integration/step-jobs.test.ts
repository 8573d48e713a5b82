import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { InvalidArgumentError, StaleClaimError, type GlideMQError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';
import { claimAs, termsArgs } from '../helpers/recovery.js';

const STEP_WORKER = fileURLToPath(new URL('../fixtures/step-worker.js', import.meta.url));

let seq = 0;
const qname = () => `step-${process.pid}-${++seq}`;

/** A processor that walks `steps`, parking the job `parkMs` between steps, recording each run. */
function stepper(steps: string[], seen: string[], parkMs = 0) {
  return async (job: Job) => {
    const step = (job.data.step as string | undefined) ?? steps[0];
    seen.push(`${job.id}:${step}`);
    const next = steps[steps.indexOf(step) + 1];
    if (next === undefined) return { finishedAt: step };
    await job.moveToDelayed(Date.now() + parkMs, next);
    return 'ignored: the job was moved';
  };
}

describe('step jobs: moveToDelayed', function () {
  const server = useServer();
  let queue: Queue;
  let worker: Worker | undefined;

  afterEach(async () => {
    await worker?.close(true);
    worker = undefined;
    await queue?.close();
  });

  it('parks the job with the next step, re-queues it when due, and resumes from data.step', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const job = await queue.add('walk', { keep: 'me' });
    const seen: string[] = [];
    const moved: string[] = [];
    worker = new Worker(queue.name, stepper(['fetch', 'transform', 'store'], seen, 40), { connection: server().url, promotionInterval: 20 });
    worker.on('moved', (j: Job) => moved.push(String(j.data.step)));
    const done = await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed' && queue.getJob(job.id), 'the step job to complete');
    expect(seen).to.deep.equal([`${job.id}:fetch`, `${job.id}:transform`, `${job.id}:store`]);
    expect(moved).to.deep.equal(['transform', 'store']);
    expect(done && done.data).to.deep.equal({ keep: 'me', step: 'store' });
    expect(done && done.returnvalue).to.deep.equal({ finishedAt: 'store' });
    // steps are not attempts: only the final run counts
    expect(done && done.attemptsMade).to.equal(1);
    expect(worker.finished.completed).to.equal(1);
  });

  it('stores the step atomically with the move: a parked job already holds its next step', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const job = await queue.add('park', { n: 1 });
    worker = new Worker(queue.name, stepper(['a', 'b'], [], 60_000), { connection: server().url });
    const parked = await waitFor(async () => {
      const j = await queue.getJob(job.id);
      return j?.state === 'delayed' && j;
    }, 'the job to be parked');
    expect(parked && parked.data).to.deep.equal({ n: 1, step: 'b' });
    const c = queue.client;
    const score = Number(await c.zscore(queue.keys.scheduled, job.id));
    expect(score).to.be.greaterThan(Date.now() + 50_000);
    const h = await c.hgetall(queue.keys.job(job.id));
    expect(h.owner).to.equal(undefined);
    expect(h.src).to.equal(undefined);
    expect(await c.xpending(queue.keys.stream, 'workers')).to.satisfy((p: unknown[]) => p[0] === 0);
    expect(await c.xlen(queue.keys.stream)).to.equal(0);
  });

  it('splices the step into the stored JSON without touching anything else', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    const job = await queue.add('raw', {});
    const original = '{ "a" : {"step":"inner","x":[]}, "s":"x\\"}{[,\\\\", "e":[], "f":0.30000000000000004, "step" : 1 , "z": {} }';
    await c.hset(queue.keys.job(job.id), 'data', original);
    const empty = await queue.add('raw', {});
    const cases: string[] = [];
    worker = new Worker(
      queue.name,
      async (j: Job) => {
        if (j.raw.data.includes('"next"')) return 'done';
        await j.moveToDelayed(Date.now() + 60_000, { next: [1, 'two'] });
        cases.push(j.id);
        return undefined;
      },
      { connection: server().url, concurrency: 2 },
    );
    await waitFor(() => cases.length === 2, 'both jobs to be parked');
    expect(await c.hget(queue.keys.job(job.id), 'data')).to.equal(
      '{ "a" : {"step":"inner","x":[]}, "s":"x\\"}{[,\\\\", "e":[], "f":0.30000000000000004, "step" : {"next":[1,"two"]} , "z": {} }',
    );
    expect(await c.hget(queue.keys.job(empty.id), 'data')).to.equal('{"step":{"next":[1,"two"]}}');
  });

  it('re-queues priority and LIFO jobs where their options say', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    const pri = await queue.add('p', {}, { priority: 7 });
    const lifo = await queue.add('l', {}, { lifo: true });
    const plain = await queue.add('s', {});
    const seen: string[] = [];
    // parked for a short real delay; the worker closes as the third job parks, so its own
    // promotion tick (cleared by close) never re-queues them and the test's promote call does
    let moved = 0;
    const first = new Worker(queue.name, stepper(['one', 'two'], seen, 800), { connection: server().url, concurrency: 3 });
    worker = first;
    first.on('moved', () => {
      if (++moved === 3) void first.close();
    });
    await waitFor(async () => (await c.zcard(queue.keys.scheduled)) === 3, 'all three jobs to be parked');
    await first.close();
    worker = undefined;
    expect(await c.get(queue.keys.listActive)).to.equal('0');
    expect(await c.scard(queue.keys.listActiveIds)).to.equal(0);
    // promotion, as a worker's tick runs it, once they are due by the server's clock
    let promoted = 0;
    await waitFor(async () => {
      promoted += ((await callFunction(c, 'glidemq_promote', queue.keys.meta, [1000])) as number[])[0];
      return promoted === 3;
    }, 'the parked jobs to be due');
    expect(await c.zrange(queue.keys.prioritized, '0', '-1')).to.deep.equal([pri.id]);
    expect(await c.lrange(queue.keys.lifo, 0, -1)).to.deep.equal([lifo.id]);
    const entries = (await c.xrange(queue.keys.stream, '-', '+')) as [string, string[]][];
    expect(entries.map((e) => e[1][1])).to.deep.equal([plain.id]);
    expect((await queue.getJob(pri.id))?.state).to.equal('prioritized');
    seen.length = 0;
    worker = new Worker(queue.name, stepper(['one', 'two'], seen, 60_000), { connection: server().url });
    await waitFor(async () => (await queue.getJobCounts()).completed === 3, 'all three to complete');
    // priority first, then LIFO, then the stream; each resumed at step two
    expect(seen).to.deep.equal([`${pri.id}:two`, `${lifo.id}:two`, `${plain.id}:two`]);
  });

  it('re-queues at once when the timestamp is not in the future', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const job = await queue.add('now', {}, { priority: 3 });
    const seen: string[] = [];
    worker = new Worker(queue.name, stepper(['a', 'b', 'c'], seen, -1000), { connection: server().url, promotionInterval: 60_000 });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed', 'the job to complete');
    expect(seen).to.deep.equal([`${job.id}:a`, `${job.id}:b`, `${job.id}:c`]);
  });

  it('refuses a stale claim and changes nothing', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    const job = await queue.add('stale', { v: 1 });
    let thrown: unknown;
    const lost: string[] = [];
    worker = new Worker(
      queue.name,
      async (j: Job) => {
        await c.hincrby(queue.keys.job(j.id), 'fence', 1); // another activation took the claim
        try {
          await j.moveToDelayed(Date.now() + 60_000, 'next');
        } catch (err) {
          thrown = err;
          throw err;
        }
      },
      { connection: server().url },
    );
    worker.on('lost', (j: Job) => lost.push(j.id));
    await waitFor(() => lost.length === 1, 'the stale finish');
    expect(thrown).to.be.instanceOf(StaleClaimError);
    const h = await c.hgetall(queue.keys.job(job.id));
    expect(h.state).to.equal('active');
    expect(h.data).to.equal('{"v":1}');
    expect(await c.zcard(queue.keys.scheduled)).to.equal(0);
  });

  it('the claim that parked its job may still write its data, progress and log, until the job is claimed again', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    await queue.add('fenced', { v: 1 });
    const [{ id, fence }] = await claimAs(queue, 'c1', 1);
    const other = (n: number) => String(Number(fence) + n);
    const data = (f: string, v: unknown) => callFunction(c, 'glidemq_updateData', queue.keys.meta, [id, f, JSON.stringify({ v }), 0]);
    const progress = (f: string, p: number) => callFunction(c, 'glidemq_updateProgress', queue.keys.meta, [id, f, String(p)]);
    expect(await callFunction(c, 'glidemq_moveToDelayed', queue.keys.meta, [id, fence, 'c1', 'in', 60_000, ''])).to.equal('delayed');
    // the parking claim writes the job it parked (BullMQ's step pattern: moveToDelayed, updateData)
    expect(await data(fence, 2)).to.equal(1);
    expect(await progress(fence, 50)).to.equal(1);
    expect(await callFunction(c, 'glidemq_addLog', queue.keys.meta, [id, fence, 'parked at step 1', 0])).to.equal(1);
    // any other fence is not the parking claim's
    expect(await data(other(-1), 'older')).to.equal(0);
    expect(await data(other(1), 'newer')).to.equal(0);
    expect(await progress(other(1), 99)).to.equal(0);
    // promoted but not yet claimed: still the parking claim's to write
    expect(await callFunction(c, 'glidemq_promoteJob', queue.keys.meta, [id])).to.equal('waiting');
    expect(await data(fence, 3)).to.equal(1);
    // claimed again: the old token may write nothing more, the new claim may
    const [again] = await claimAs(queue, 'c2', 1);
    expect(again).to.deep.equal({ id, fence: other(1) });
    expect(await data(fence, 'stale')).to.equal(0);
    expect(await progress(fence, 100)).to.equal(0);
    expect(await callFunction(c, 'glidemq_addLog', queue.keys.meta, [id, fence, 'stale line', 0])).to.equal(0);
    const h = await c.hgetall(queue.keys.job(id));
    expect(h.data).to.equal('{"v":3}');
    expect(h.progress).to.equal('50');
    expect(await c.lrange(queue.keys.logs(id), 0, -1)).to.deep.equal(['parked at step 1']);
    expect(await data(again.fence, 4)).to.equal(1);
  });

  it('a job delayed by its backoff, not by its own step, refuses the writes of the claim that failed', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    await queue.add('retry', { v: 1 }, { attempts: 3 });
    const [{ id, fence }] = await claimAs(queue, 'c1', 1);
    const r = (await callFunction(c, 'glidemq_finish', queue.keys.meta, [id, fence, 'c1', 'failed', 'boom', 60_000, 0, '', 1, '0', ...termsArgs()])) as unknown[];
    expect(r[0]).to.equal('delayed');
    expect(await callFunction(c, 'glidemq_updateData', queue.keys.meta, [id, fence, '{"v":2}', 0])).to.equal(0);
    expect(await callFunction(c, 'glidemq_updateProgress', queue.keys.meta, [id, fence, '7'])).to.equal(0);
    expect(await c.hget(queue.keys.job(id), 'data')).to.equal('{"v":1}');
  });

  it('refuses a job whose data is not an object, before writing anything', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    const job = await queue.add('arr', [1, 2]);
    let thrown: unknown;
    worker = new Worker(
      queue.name,
      async (j: Job) => {
        try {
          await j.moveToDelayed(Date.now() + 60_000, 'next');
        } catch (err) {
          thrown = err;
        }
        return 'ran without steps';
      },
      { connection: server().url },
    );
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed', 'the job to complete');
    expect(thrown).to.be.instanceOf(InvalidArgumentError);
    expect(String((thrown as Error).message)).to.match(/not a JSON object/);
    expect(await c.hget(queue.keys.job(job.id), 'data')).to.equal('[1,2]');
  });

  it('moveToDelayedIn parks for a delay the server counts from its own clock', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    const job = await queue.add('rel', { n: 1 });
    const [sec, usec] = (await c.time()) as [string | number, string | number];
    const serverBefore = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    worker = new Worker(queue.name, async (j: Job) => j.moveToDelayedIn(60_000, 'b'), { connection: server().url });
    const parked = await waitFor(async () => {
      const j = await queue.getJob(job.id);
      return j?.state === 'delayed' && j;
    }, 'the job to be parked');
    expect(parked && parked.data).to.deep.equal({ n: 1, step: 'b' });
    const score = Number(await c.zscore(queue.keys.scheduled, job.id));
    expect(score).to.be.within(serverBefore + 60_000, serverBefore + 70_000);
  });

  it('moveToDelayedIn(0) re-queues at once', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const job = await queue.add('zero', {}, { lifo: true });
    const seen: string[] = [];
    worker = new Worker(
      queue.name,
      async (j: Job) => {
        const step = (j.data.step as string | undefined) ?? 'a';
        seen.push(step);
        if (step === 'a') return j.moveToDelayedIn(0, 'b');
        return 'done';
      },
      { connection: server().url, promotionInterval: 60_000 },
    );
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed', 'the job to complete');
    expect(seen).to.deep.equal(['a', 'b']);
  });

  it('refuses a run time of nan before writing anything (the claim and its entry stay)', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const c = queue.client;
    await queue.add('nan', {});
    const [{ id, fence }] = await claimAs(queue, 'c1', 1);
    const before = await keyspaceFingerprint(c as Redis, `${queue.keys.base}*`);
    for (const [timing, ms] of [['at', 'nan'], ['in', 'nan'], ['at', 'inf'], ['in', '-5'], ['soon', '5']]) {
      const err = await callFunction(c, 'glidemq_moveToDelayed', queue.keys.meta, [id, fence, 'c1', timing, ms, '']).then(
        () => undefined,
        (e: Error) => e,
      );
      expect((err as GlideMQError).code, `${timing} ${ms}`).to.equal('ERR_INVALID');
      expect(String(err), `${timing} ${ms}`).to.match(/glidemq_moveToDelayed: (ms|timing) must be/);
    }
    const bad = await callFunction(c, 'glidemq_moveToDelayed', queue.keys.meta, [id, fence, 'c1', 'in', 5, '1,"x":2']).then(
      () => undefined,
      (e: Error) => e,
    );
    expect((bad as GlideMQError).code).to.equal('ERR_INVALID');
    expect(String(bad)).to.match(/glidemq_moveToDelayed: step must be/);
    expect(await keyspaceFingerprint(c as Redis, `${queue.keys.base}*`)).to.equal(before);
    expect(await c.hget(queue.keys.job(id), 'state')).to.equal('active');
  });

  it('is only available to the worker that runs the job', async () => {
    queue = new Queue(qname(), { connection: server().url });
    const job = await queue.add('x', {});
    const fetched = await queue.getJob(job.id);
    let err: unknown;
    await fetched!.moveToDelayed(Date.now()).catch((e) => (err = e));
    expect(String(err)).to.match(/only possible from the worker/);
  });
});

describe('step jobs: durability', function () {
  this.timeout(60_000);
  let server: TestServer;
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    server = await new TestServer({ persistence: 'aof-always' }).start();
  });
  afterEach(async () => {
    for (const ch of children.splice(0)) if (ch.exitCode === null && ch.signalCode === null) ch.kill('SIGKILL');
    await server.stop();
  });

  async function jobState(queue: Queue, id: string) {
    const c = queue.client;
    return {
      hash: await c.hgetall(queue.keys.job(id)),
      score: await c.zscore(queue.keys.scheduled, id),
      scheduled: await c.zrange(queue.keys.scheduled, '0', '-1'),
    };
  }

  it('a parked step job and its step survive a server SIGKILL, then run from that step', async () => {
    const name = qname();
    let queue = new Queue(name, { connection: server.url });
    const job = await queue.add('durable', { order: 42 }, { priority: 5 });
    const seen: string[] = [];
    // parked for a short real delay; the worker closes as it parks, so nothing promotes the job
    // until the second worker runs (close clears the promotion timer before it can fire)
    let worker = new Worker(name, stepper(['charge', 'ship', 'notify'], seen, 1000), { connection: server.url });
    const first = worker;
    first.on('moved', () => void first.close());
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'delayed', 'the job to be parked');
    await worker.close();
    const before = await jobState(queue, job.id);
    await queue.close();

    await server.kill();
    await server.start();

    queue = new Queue(name, { connection: server.url });
    expect(await jobState(queue, job.id)).to.deep.equal(before);
    expect(before.hash.data).to.equal('{"order":42,"step":"ship"}');
    // once due (by the server's clock), the promotion loop re-queues it and the processor resumes
    worker = new Worker(name, stepper(['charge', 'ship', 'notify'], seen, 0), { connection: server.url, promotionInterval: 50 });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed', 'the job to complete after restart');
    expect(seen).to.deep.equal([`${job.id}:charge`, `${job.id}:ship`, `${job.id}:notify`]);
    await worker.close();
    await queue.close();
  });

  it('a step job whose worker process is SIGKILLed resumes from its last stored step', async () => {
    const name = qname();
    const queue = new Queue(name, { connection: server.url });
    const c = queue.client;
    const job = await queue.add('crash', { id: 'x' }, { lifo: true });
    const child = spawn(process.execPath, [STEP_WORKER, server.url, name], {
      // parked for 2 s: the test kills the child as soon as it sees the job parked, long before
      // the child's own promotion tick could re-queue it
      env: { ...process.env, STEPS: 'one,two,three', PARK_MS: '2000', TRACE_KEY: `trace:${name}` },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'delayed', 'the child to park the job at step two');
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(await c.lrange(`trace:${name}`, 0, -1)).to.deep.equal([`${job.id}:one`]);
    expect((await queue.getJob(job.id))?.data).to.deep.equal({ id: 'x', step: 'two' });

    const seen: string[] = [];
    // once due (by the server's clock) another worker's promotion re-queues it
    const worker = new Worker(name, stepper(['one', 'two', 'three'], seen, 0), { connection: server.url, promotionInterval: 50 });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed', 'the job to complete on another worker');
    expect(seen).to.deep.equal([`${job.id}:two`, `${job.id}:three`]);
    await worker.close();
    await queue.close();
  });

  it("a step job of BullMQ's pattern (moveToDelayed, updateData, DelayedError) whose worker is SIGKILLed resumes from the step updateData stored", async () => {
    const name = qname();
    const queue = new Queue(name, { connection: server.url });
    const job = await queue.add('crash', { id: 'y' });
    const traceKey = `trace:${name}`;
    const child = spawn(process.execPath, [STEP_WORKER, server.url, name], {
      // parked for 2 s: the test kills the child once the next step is stored, before it is due
      env: { ...process.env, STEPS: 'one,two,three', PARK_MS: '2000', TRACE_KEY: traceKey, PATTERN: 'bullmq' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    await waitFor(async () => {
      const j = await queue.getJob(job.id);
      return j?.state === 'delayed' && j.data.step === 'two';
    }, 'the child to park the job and store step two');
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(await queue.client.lrange(traceKey, 0, -1)).to.deep.equal([`${job.id}:one`]);

    const seen: string[] = [];
    const worker = new Worker(name, stepper(['one', 'two', 'three'], seen, 0), { connection: server.url });
    await waitFor(async () => (await queue.getJob(job.id))?.state === 'completed', 'the job to complete on another worker');
    expect(seen).to.deep.equal([`${job.id}:two`, `${job.id}:three`]);
    await worker.close();
    await queue.close();
  });

  for (const kind of ['stream', 'priority', 'lifo'] as const) {
    it(`a ${kind} step job whose worker is SIGKILLed mid-step is reclaimed and reruns only that step`, async () => {
      const name = qname();
      const queue = new Queue(name, { connection: server.url });
      const c = queue.client;
      const opts = kind === 'priority' ? { priority: 3 } : kind === 'lifo' ? { lifo: true } : {};
      const job = await queue.add('crash', { order: 7 }, opts);
      const traceKey = `trace:${name}`;
      const child = spawn(process.execPath, [STEP_WORKER, server.url, name], {
        env: { ...process.env, STEPS: 'one,two,three', PARK_MS: '0', HANG_AT: 'two', TRACE_KEY: traceKey, LOCK_MS: '400' },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.push(child);
      await waitFor(async () => (await c.llen(traceKey)) === 2, 'the child to reach step two');
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const held = await queue.getJob(job.id);
      expect(held?.state).to.equal('active');
      expect(held?.data).to.deep.equal({ order: 7, step: 'two' });

      const seen: string[] = [];
      const worker = new Worker(name, stepper(['one', 'two', 'three'], seen, 0), {
        connection: server.url,
        lockDuration: 400,
        stalledInterval: 150,
      });
      worker.on('error', () => undefined);
      const done = await waitFor(async () => {
        const j = await queue.getJob(job.id);
        return j?.state === 'completed' && j;
      }, 'the reclaimed job to complete');
      expect(await c.lrange(traceKey, 0, -1)).to.deep.equal([`${job.id}:one`, `${job.id}:two`]);
      expect(seen).to.deep.equal([`${job.id}:two`, `${job.id}:three`]);
      expect(done && done.stalledCount).to.equal(1);
      expect(done && done.data).to.deep.equal({ order: 7, step: 'three' });
      await worker.close();
      await queue.close();
    });
  }
});
