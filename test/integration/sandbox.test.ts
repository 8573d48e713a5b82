import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker, type WorkerOptions } from '../../src/engine/consuming/worker.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';
import { processorPath } from '../helpers/worker-spawn.js';

type Outcome = { state: 'completed'; value: any; job: Job } | { state: 'failed'; reason: string; job: Job };
type Mode = 'process' | 'thread';

const ACTS = processorPath('sandbox-acts.mjs');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('Sandboxed processors (real valkey-server)', function () {
  this.timeout(60_000);
  const server = useServer();
  const open: { close(force?: boolean): Promise<void> }[] = [];

  afterEach(async () => {
    await Promise.all(open.splice(0).map((o) => o.close(true)));
  });

  /** A queue and a sandboxed worker on it; each job's outcome lands in `outcomes` by id. */
  function sandboxed(mode: Mode, opts: WorkerOptions = {}, file: string | URL = ACTS) {
    const name = uniqueQueue('sandbox');
    const queue = new Queue(name, { connection: server().url });
    const worker = new Worker(name, file, { connection: server().url, blockTimeout: 1000, useWorkerThreads: mode === 'thread', ...opts });
    worker.on('error', () => undefined);
    open.push(worker, queue);
    const outcomes = new Map<string, Outcome>();
    worker.on('completed', (job: Job, value: unknown) => outcomes.set(job.id, { state: 'completed', value, job }));
    worker.on('failed', (job: Job | undefined, err: Error) => job && outcomes.set(job.id, { state: 'failed', reason: err.message, job }));
    const settled = (id: string) => waitFor(() => outcomes.get(id), `job ${id} settles`, 30_000) as Promise<Outcome>;
    const add = async (data: Record<string, unknown>) => (await queue.add('act', data)).id;
    return { queue, worker, outcomes, settled, add };
  }

  for (const mode of ['process', 'thread'] as const) {
    describe(`in ${mode === 'process' ? 'child processes' : 'worker threads'}`, () => {
      it('runs the file outside this thread, one child per slot reused job after job, with the job, its token and a signal', async () => {
        const { worker, settled, add } = sandboxed(mode, { concurrency: 2 });
        const ids = await Promise.all(Array.from({ length: 6 }, () => add({})));
        const values = await Promise.all(ids.map(async (id) => (await settled(id)) as Outcome & { state: 'completed' }));
        for (const [i, o] of values.entries()) {
          expect(o.state).to.equal('completed');
          expect(o.value).to.include({ id: ids[i], name: 'act', attemptsMade: 0, signal: true });
          expect(o.value.token).to.equal(o.job.token ?? o.value.token).and.to.be.a('string');
          if (mode === 'process') expect(o.value.pid).to.not.equal(process.pid);
          else expect(o.value.threadId).to.be.greaterThan(0);
        }
        const children = new Set(values.map((o) => (mode === 'process' ? o.value.pid : o.value.threadId)));
        expect(children.size).to.be.within(1, 2);
        expect(worker.sandbox!.pool.size).to.be.at.most(2);
      });

      it('takes a file URL, and a CommonJS module.exports', async () => {
        const a = sandboxed(mode, {}, pathToFileURL(ACTS));
        const b = sandboxed(mode, {}, processorPath('echo.cjs'));
        expect((await a.settled(await a.add({}))).state).to.equal('completed');
        const echoed = await b.settled(await b.add({ x: 1 }));
        expect(echoed).to.include({ state: 'completed' });
        expect((echoed as { value: unknown }).value).to.deep.equal({ echoed: { x: 1 }, cjs: true });
      });

      it("makes the job's calls through the parent: progress, log and data reach the server", async () => {
        const { queue, worker, settled, add } = sandboxed(mode);
        const progress: unknown[] = [];
        worker.on('progress', (_job: Job, p: unknown) => progress.push(p));
        const id = await add({ act: 'calls' });
        const o = (await settled(id)) as Outcome & { state: 'completed' };
        expect(o.value).to.deep.equal({ data: { act: 'calls', touched: true }, progress: 42 });
        const stored = (await queue.getJob(id))!;
        expect(stored.progress).to.equal(42);
        expect(stored.data).to.deep.equal({ act: 'calls', touched: true });
        expect((await queue.getJobLogs(id)).logs).to.deep.equal(['a line from the sandbox']);
        expect(progress).to.deep.equal([42]);
      });

      it('parks a job with moveToDelayed and DelayedError: no outcome is stored for the run', async () => {
        const { queue, worker, add } = sandboxed(mode);
        const moved: string[] = [];
        worker.on('moved', (job: Job) => moved.push(job.id));
        const id = await add({ act: 'delay' });
        await waitFor(() => moved.includes(id), 'the job parks');
        expect(await queue.getJobState(id)).to.equal('delayed');
        expect(worker.finished).to.deep.equal({ completed: 0, failed: 0 });
      });

      const failures: { act: string; says: RegExp; modes: Mode[]; opts?: WorkerOptions }[] = [
        { act: 'throw', says: /^boom in job \d+$/, modes: ['process', 'thread'] },
        { act: 'exit', says: /its sandbox (process|thread) \d+ exited with code 3 while running it/, modes: ['process', 'thread'] },
        // a signal to the process would end a thread's whole process: processes only
        { act: 'signal', says: /its sandbox process \d+ was killed by SIGKILL while running it/, modes: ['process'] },
        { act: 'oom', says: /its sandbox (process|thread) \d+ ran out of memory \(heap limit 64 MB\) while running it/, modes: ['process', 'thread'], opts: { sandbox: { maxMemoryMb: 64 } } },
      ];
      for (const f of failures.filter((x) => x.modes.includes(mode))) {
        it(`isolates a processor that does "${f.act}": the job fails saying so, other slots run on, the next job completes`, async () => {
          const { worker, settled, add } = sandboxed(mode, { concurrency: 2, ...f.opts });
          const beside = await add({ act: 'slow', ms: 300 });
          const bad = await add({ act: f.act });
          const failed = await settled(bad);
          expect(failed.state).to.equal('failed');
          expect((failed as { reason: string }).reason).to.match(f.says);
          expect((await settled(beside)).state).to.equal('completed');
          const next = await Promise.all([add({}), add({})]);
          for (const id of next) expect((await settled(id)).state).to.equal('completed');
          expect(worker.isRunning()).to.equal(true);
        });
      }

      it('isolates a module that fails to load: the job fails saying so, a new child loads it, the next job completes', async () => {
        const dir = mkdtempSync(join(tmpdir(), 'glidemq-sandbox-'));
        const flag = join(dir, 'fail-once');
        writeFileSync(flag, '');
        process.env.GLIDEMQ_TEST_LOAD_FAIL = flag;
        try {
          const { settled, add } = sandboxed(mode, {}, processorPath('sandbox-load-fails.mjs'));
          const first = await settled(await add({}));
          expect(first.state).to.equal('failed');
          expect((first as { reason: string }).reason).to.match(/the sandboxed processor .*sandbox-load-fails\.mjs cannot be loaded: a dependency of the processor is broken/);
          const next = await settled(await add({}));
          expect(next).to.include({ state: 'completed' });
          expect((next as { value: unknown }).value).to.deep.equal({ loaded: true });
        } finally {
          delete process.env.GLIDEMQ_TEST_LOAD_FAIL;
        }
      });

      it('kills a child that ignores its abort (a CPU-bound loop) after the grace: the job fails with the reason, the slot runs the next job', async () => {
        const { worker, settled, add } = sandboxed(mode, { sandbox: { abortGraceMs: 300 } });
        const id = await add({ act: 'loop' });
        await waitFor(() => worker.activeCount === 1, 'the loop runs');
        const t0 = Date.now();
        expect(worker.cancelJob(id, 'stop it')).to.equal(true);
        const o = await settled(id);
        expect(o).to.include({ state: 'failed', reason: 'stop it' });
        expect(Date.now() - t0).to.be.below(5_000);
        expect((await settled(await add({}))).state).to.equal('completed');
      });

      it('fails a job whose CPU-bound loop outlives its timeout: its child is killed after the grace, the job fails "timed out after N ms", the slot runs the next job', async () => {
        const { queue, settled, add } = sandboxed(mode, { sandbox: { abortGraceMs: 300 } });
        const t0 = Date.now();
        const { id } = await queue.add('act', { act: 'loop' }, { timeout: 300 });
        expect(await settled(id)).to.include({ state: 'failed', reason: 'timed out after 300 ms' });
        expect(Date.now() - t0).to.be.below(5_000);
        expect((await settled(await add({}))).state).to.equal('completed');
      });

      it('passes an abort to the processor, which settles on its own within the grace and keeps its child', async () => {
        const { worker, settled, add } = sandboxed(mode, { sandbox: { abortGraceMs: 10_000 } });
        const first = (await settled(await add({}))) as Outcome & { state: 'completed' };
        const id = await add({ act: 'abortable' });
        await waitFor(() => worker.activeCount === 1, 'the job runs');
        worker.cancelJob(id, 'not needed');
        expect(await settled(id)).to.include({ state: 'failed', reason: 'stopped on request: not needed' });
        const after = (await settled(await add({}))) as Outcome & { state: 'completed' };
        const child = (o: typeof first) => (mode === 'process' ? o.value.pid : o.value.threadId);
        expect(child(after)).to.equal(child(first));
      });

      it("refuses a job call made after its run ended: it never reaches the job the child runs next", async () => {
        const { queue, settled, add } = sandboxed(mode);
        const stray = await add({ act: 'stray', ms: 100 });
        const next = await add({ act: 'slow', ms: 600 });
        expect((await settled(stray)).state).to.equal('completed');
        expect((await settled(next)).state).to.equal('completed');
        expect((await queue.getJob(next))!.data).to.deep.equal({ act: 'slow', ms: 600 });
        expect((await queue.getJob(stray))!.data).to.deep.equal({ act: 'stray', ms: 100 });
      });

      it('ends a child idle for sandbox.idleMs, and starts another when a job needs one', async () => {
        const { worker, settled, add } = sandboxed(mode, { sandbox: { idleMs: 200 } });
        expect((await settled(await add({}))).state).to.equal('completed');
        await waitFor(() => worker.sandbox!.pool.size === 0, 'the idle child ends');
        expect((await settled(await add({}))).state).to.equal('completed');
      });
    });
  }

  it("close() ends every child it started, idle or running (checked by pid)", async () => {
    const { worker, settled, add } = sandboxed('process', { concurrency: 3 });
    await Promise.all([add({}), add({})].map(async (id) => settled(await id)));
    await add({ act: 'loop' });
    await waitFor(() => worker.activeCount === 1, 'the loop runs');
    const pids = worker.sandbox!.pool.pids();
    expect(pids.length).to.be.within(2, 3);
    for (const pid of pids) expect(alive(pid)).to.equal(true);
    await worker.close(true);
    for (const pid of pids) expect(alive(pid), `child ${pid}`).to.equal(false);
    expect(worker.sandbox!.pool.size).to.equal(0);
  });

  it('a process that exits without closing its worker takes its children with it, even one stuck in a loop', async () => {
    const name = uniqueQueue('sandbox-exit');
    const queue = new Queue(name, { connection: server().url });
    open.push(queue);
    await queue.add('act', { act: 'loop' });
    const index = new URL('../../src/index.js', import.meta.url).href;
    const script = `
      const { Worker } = await import(${JSON.stringify(index)});
      const w = new Worker(${JSON.stringify(name)}, ${JSON.stringify(ACTS)}, { connection: ${JSON.stringify(server().url)} });
      w.on('active', () => setTimeout(() => { console.log(JSON.stringify(w.sandbox.pool.pids())); process.exit(0); }, 200));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status, run.stderr).to.equal(0);
    const pids = JSON.parse(run.stdout.trim()) as number[];
    expect(pids).to.have.length(1);
    await waitFor(() => !alive(pids[0]), `child ${pids[0]} ends`, 5_000);
  });

  it('refuses a processor file that does not exist, and a URL that is not a file: URL', () => {
    expect(() => new Worker('q', '/no/such/processor.js', { connection: server().url, autorun: false })).to.throw(InvalidArgumentError, /processor file \/no\/such\/processor\.js does not exist/);
    expect(() => new Worker('q', new URL('https://example.com/p.js'), { connection: server().url, autorun: false })).to.throw(InvalidArgumentError, /file: URL/);
  });
});
