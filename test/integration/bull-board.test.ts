/**
 * GlideMQAdapter (glidemq/bull-board, issue 32) through bull-board's own API routes: a real
 * `createBullBoard` with the Express server adapter, answering HTTP, with every response checked
 * against bull-board's schemas (validateResponses). One server, one board for the file.
 */
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { createBullBoard } from '@bull-board/api';
import { ExpressAdapter } from '@bull-board/express';
import { GlideMQAdapter } from '../../src/integrations/bull-board/index.js';
import { Dashboard } from '../../src/integrations/bull-board/dashboard.js';
import type { Queue } from '../../src/engine/queue/queue.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';

type Body = Record<string, any>;

describe('glidemq/bull-board: GlideMQAdapter on bull-board\'s API', function () {
  this.timeout(30000);
  const server = useServer();
  const harness = new Harness(server);
  let http: Server;
  let base = '';
  let q: Queue;
  let ro: Queue;
  let name = '';
  let roName = '';
  const ids: Record<string, string> = {};

  const api = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  /** The board's view of `queue` with `status` jobs listed. */
  const listing = async (queue: string, status: string): Promise<Body> => {
    const r = await api('GET', `/api/queues?activeQueue=${queue}&status=${status}&page=1&jobsPerPage=10`);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return (r.body.queues as Body[]).find((x) => x.name === queue)!;
  };

  before(async () => {
    name = uniqueQueue('board');
    roName = uniqueQueue('board-ro');
    q = harness.queue(name);
    ro = harness.queue(roName);
    const w = harness.worker(name, async (job) => {
      await job.log(`ran ${job.name}`);
      await job.updateProgress(50);
      if (job.name === 'bad') throw new Error('the mail server said no');
      return { sent: true };
    });
    ids.good = (await q.add('good', { to: 'a@example.com' })).id;
    ids.bad = (await q.add('bad', { to: 'b@example.com' })).id;
    await waitFor(async () => (await q.getCompletedCount()) === 1 && (await q.getFailedCount()) === 1, 'the first jobs finished');
    await w.close();
    ids.later = (await q.add('later', { n: 1 }, { delay: 600_000 })).id;
    ids.wait = (await q.add('wait', { n: 2 })).id;
    ids.roFailed = (await ro.add('x', {})).id;

    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath('/');
    createBullBoard({
      queues: [new GlideMQAdapter(q), new GlideMQAdapter(ro, { readOnlyMode: true })],
      serverAdapter,
      options: { validateResponses: true },
    });
    http = createServer(serverAdapter.getRouter());
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    const addr = http.address();
    base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  });

  after(async () => {
    http?.closeAllConnections();
    await new Promise((r) => http?.close(r));
    await harness.cleanup();
  });

  it('lists the queues with their counts by state and their jobs by state, in BullMQ\'s job JSON', async () => {
    const failed = await listing(name, 'failed');
    expect(failed.type).to.equal('bullmq');
    expect(failed.counts).to.deep.equal({ active: 0, waiting: 1, 'waiting-children': 0, prioritized: 0, completed: 1, failed: 1, delayed: 1, paused: 0 });
    expect(failed.statuses).to.include.members(['latest', 'waiting', 'active', 'completed', 'failed', 'delayed', 'paused', 'prioritized', 'waiting-children']);
    expect(failed.jobs).to.have.length(1);
    const bad = failed.jobs[0] as Body;
    expect(bad).to.include({ id: ids.bad, name: 'bad', attempts: 1, failedReason: 'the mail server said no', isFailed: true, progress: 50 });
    expect(bad.data).to.deep.equal({ to: 'b@example.com' });
    expect(bad.stacktrace[0]).to.match(/^Error: the mail server said no\n\s+at /);
    expect(bad.processedOn).to.be.a('number');
    expect(bad.finishedOn).to.be.at.least(bad.processedOn);

    const completed = await listing(name, 'completed');
    expect(completed.jobs.map((j: Body) => j.id)).to.deep.equal([ids.good]);
    expect(completed.jobs[0].returnValue).to.deep.equal({ sent: true });
    expect((await listing(name, 'delayed')).jobs.map((j: Body) => j.id)).to.deep.equal([ids.later]);
    expect((await listing(name, 'waiting')).jobs.map((j: Body) => j.id)).to.deep.equal([ids.wait]);
    const latest = await listing(name, 'latest');
    expect(latest.jobs.map((j: Body) => j.id)).to.have.members([ids.good, ids.bad, ids.later, ids.wait]);
  });

  it('shows one job with its data, options, stack, progress and state, and its logs', async () => {
    const r = await api('GET', `/api/queues/${name}/${ids.bad}`);
    expect(r.status).to.equal(200);
    expect(r.body.status).to.equal('failed');
    expect(r.body.job).to.include({ id: ids.bad, name: 'bad', progress: 50 });
    expect(r.body.job.opts).to.include({ attempts: 1 });
    expect(r.body.job.stacktrace[0]).to.include('the mail server said no');
    expect((await api('GET', `/api/queues/${name}/${ids.bad}/logs`)).body).to.deep.equal(['ran bad']);
    expect((await api('GET', `/api/queues/${name}/no-such-job`)).status).to.equal(404);
  });

  it('retry puts the failed job back to waiting; promote runs the delayed one now; remove deletes one job', async () => {
    expect((await api('PUT', `/api/queues/${name}/${ids.bad}/retry`)).status).to.equal(204);
    expect(await q.getJobState(ids.bad)).to.equal('waiting');
    expect((await api('PUT', `/api/queues/${name}/${ids.later}/promote`)).status).to.equal(204);
    expect(await q.getJobState(ids.later)).to.equal('waiting');
    expect((await api('PUT', `/api/queues/${name}/${ids.wait}/clean`)).status).to.equal(204);
    expect(await q.getJob(ids.wait)).to.equal(undefined);
    expect((await api('PUT', `/api/queues/${name}/${ids.good}/retry`)).status).to.equal(204, 'a completed job retried');
    expect(await q.getJobState(ids.good)).to.equal('waiting');
  });

  it('pause and resume: a paused queue\'s waiting jobs are listed and counted under paused', async () => {
    expect((await api('PUT', `/api/queues/${name}/pause`)).status).to.equal(200);
    const paused = await listing(name, 'paused');
    expect(paused.isPaused).to.equal(true);
    expect(paused.counts).to.include({ waiting: 0, paused: 3 });
    expect(paused.jobs.map((j: Body) => j.id)).to.have.members([ids.bad, ids.later, ids.good]);
    expect((await listing(name, 'waiting')).jobs).to.deep.equal([]);
    expect((await api('PUT', `/api/queues/${name}/resume`)).status).to.equal(200);
    expect(await q.isPaused()).to.equal(false);
    expect((await listing(name, 'waiting')).counts).to.include({ waiting: 3, paused: 0 });
  });

  it('add creates a job; clean removes the jobs of a state older than its grace time', async () => {
    const r = await api('POST', `/api/queues/${name}/add`, { name: 'from-board', data: { hello: 'world' }, options: { delay: 0 } });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.status).to.equal('waiting');
    const added = await q.getJob(r.body.job.id);
    expect(added?.name).to.equal('from-board');
    expect(added?.data).to.deep.equal({ hello: 'world' });

    // bull-board cleans what finished more than 5 s ago: the finished job's time is set an hour back
    const w = harness.worker(name, async () => 'done');
    await waitFor(async () => (await q.getCompletedCount()) === 4, 'the jobs completed');
    await w.close();
    const hourAgo = (await q.serverTime()) - 3_600_000;
    for (const job of await q.getCompleted()) await q.client.zadd(q.keys.completed, 'XX', hourAgo, job.id);
    expect((await api('PUT', `/api/queues/${name}/clean/completed`)).status).to.equal(200);
    expect(await q.getCompletedCount()).to.equal(0);
  });

  it('metrics and workers answer in bull-board\'s shapes', async () => {
    const m = await api('GET', `/api/queues/${name}/metrics`);
    expect(m.status, JSON.stringify(m.body)).to.equal(200);
    expect(m.body.completed.count).to.be.at.least(5);
    expect(m.body.failed.count).to.equal(1);
    const w = harness.worker(name, async () => undefined);
    await waitFor(async () => (await q.getWorkers()).length === 1, 'the worker registered');
    const workers = await api('GET', `/api/queues/${name}/workers`);
    expect(workers.status, JSON.stringify(workers.body)).to.equal(200);
    expect(workers.body.workers).to.have.length(1);
    await w.close();
  });

  it('a flow: the job view reads the tree from its root, the children in their states', async () => {
    const flow = await harness.flowProducer().add({ name: 'parent', queueName: name, data: {}, children: [{ name: 'child', queueName: name, data: {} }] });
    const child = flow.children![0]!.job;
    const r = await api('GET', `/api/queues/${name}/${child.id}/flow?depth=3&maxChildren=20`);
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.isFlowNode).to.equal(true);
    expect(r.body.flowRoot).to.include({ id: flow.job.id, name: 'parent', state: 'waiting-children', queueName: name });
    expect(r.body.flowRoot.children.map((c: Body) => [c.id, c.state])).to.deep.equal([[child.id, 'waiting']]);
  });

  it('a read-only adapter shows its queue and refuses every action', async () => {
    const view = await listing(roName, 'latest');
    expect(view.readOnlyMode).to.equal(true);
    expect(view.allowRetries).to.equal(false);
    for (const [method, path] of [
      ['PUT', `/api/queues/${roName}/pause`],
      ['PUT', `/api/queues/${roName}/${ids.roFailed}/clean`],
      ['POST', `/api/queues/${roName}/add`],
    ] as const) {
      const r = await api(method, path, method === 'POST' ? { name: 'x', data: {}, options: {} } : undefined);
      expect(r.status, `${method} ${path}`).to.be.within(400, 499);
    }
    expect(await ro.isPaused()).to.equal(false);
    expect(await ro.getJob(ids.roFailed)).to.not.equal(undefined);
  });

  it('the dashboard (glidemq ui\'s server) read-only: every queue of the prefix shown, every action refused', async () => {
    const dashboard = new Dashboard({ connection: { url: server().url, cluster: false }, prefix: 'glide', readOnly: true });
    try {
      await dashboard.connect(server().url);
      expect(dashboard.queueNames).to.include.members([name, roName]);
      const port = await dashboard.listen(0, '127.0.0.1');
      const board = `http://127.0.0.1:${port}`;
      const view = (await (await fetch(`${board}/api/queues`)).json()) as { queues: Body[] };
      expect(view.queues.map((x) => x.name)).to.include.members([name, roName]);
      expect(view.queues.every((x) => x.readOnlyMode === true)).to.equal(true);
      expect((await fetch(`${board}/api/queues/${name}/pause`, { method: 'PUT' })).status).to.be.within(400, 499);
      expect(await q.isPaused()).to.equal(false);
      const audit = (await (await fetch(`${board}/audit.json`)).json()) as { nodes: { checks: { id: string }[] }[] };
      expect(audit.nodes[0]!.checks.map((c) => c.id)).to.include('appendonly');
    } finally {
      await dashboard.close();
    }
  });
});
