import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { TestServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';

const HOLDING_WORKER = fileURLToPath(new URL('../fixtures/holding-worker.js', import.meta.url));

describe('Group state after a worker SIGKILL', function () {
  this.timeout(60_000);
  let server: TestServer;
  const children: ChildProcess[] = [];
  before(async () => {
    server = await new TestServer({ persistence: 'aof-always' }).start();
  });
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
  after(() => server.stop());

  it("a killed holder's group slot comes back through stalled recovery, and the group's jobs all complete in order", async () => {
    const name = uniqueQueue('gcrash');
    const q = new Queue(name, { connection: server.url });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push((await q.add('j', { i, hang: i === 0 }, { group: { id: 'acct', maxConcurrency: 1 } })).id);
    }
    await q.add('other', { hang: false }, { group: { id: 'free' } });
    const traceKey = `trace:${name}`;
    const child = spawn(process.execPath, [HOLDING_WORKER, 'group', server.url, name], {
      // (its claim is stalled once its own lock of 1 s has run out after the kill)
      env: { ...process.env, TRACE_KEY: traceKey, LOCK_MS: '1000', STALLED_MS: '60000', CONCURRENCY: '3' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    await waitFor(async () => (await q.client.lrange(traceKey, 0, -1)).includes(ids[0]), 'the child to hold the group slot');
    await waitFor(async () => (await q.getJobCounts()).completed === 1, 'the other group to run meanwhile');
    const held = await q.getGroup('acct');
    expect(held).to.include({ active: 1, waiting: 3 });
    expect(Object.keys(held!.holders)).to.deep.equal([ids[0]]);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(await q.getGroup('acct')).to.include({ active: 1 }); // the dead process still holds the slot

    const order: string[] = [];
    const rescuer = new Worker(name, async (job) => void order.push(job.id), {
      connection: server.url,
      concurrency: 3,
      lockDuration: 300,
      stalledInterval: 100,
      blockTimeout: 500,
    });
    rescuer.on('error', () => undefined);
    await waitFor(() => order.length === 4, 'the group to drain after recovery');
    expect(order).to.deep.equal(ids); // the reclaimed job went back to the head of its line
    expect((await q.getJob(ids[0]))?.stalledCount).to.equal(1);
    const after = await q.getGroup('acct');
    expect(after).to.include({ active: 0, waiting: 0 });
    expect(after!.holders).to.deep.equal({});
    expect(await q.getJobCounts()).to.include({ completed: 5, active: 0, waiting: 0, listActive: 0 });
    await rescuer.close();
    await q.close();
  });
});
