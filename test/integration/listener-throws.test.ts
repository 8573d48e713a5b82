import { expect } from 'chai';
import { Worker } from '../../src/engine/consuming/worker.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker } from '../../src/engine/broadcast/broadcast-worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { ListenerError } from '../../src/engine/shared/safe-emitter.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

/** Counts, per event, the throws a listener made and the ListenerErrors that arrived as `error`. */
class ThrowLedger {
  readonly thrown: Record<string, Error[]> = {};
  readonly arrived: Record<string, unknown[]> = {};
  readonly otherErrors: unknown[] = [];

  /** A listener for `event` that throws a fresh error each call (recorded before it is thrown). */
  thrower(event: string): () => never {
    return () => {
      const err = new Error(`boom from ${event} #${(this.thrown[event] ??= []).length}`);
      this.thrown[event].push(err);
      throw err;
    };
  }

  onError = (err: unknown): void => {
    if (err instanceof ListenerError) (this.arrived[err.event] ??= []).push(err.cause);
    else this.otherErrors.push(err);
  };

  /** Every throw arrived as exactly one `error` event whose cause is that very throw. */
  expectOneErrorPerThrow(events: string[]): void {
    for (const event of events) {
      expect(this.thrown[event]?.length ?? 0, `${event} listener threw`).to.be.greaterThan(0);
      expect(this.arrived[event], `error events for ${event}`).to.deep.equal(this.thrown[event]);
    }
    expect(Object.keys(this.arrived).sort()).to.deep.equal([...events].sort());
  }
}

describe('A throwing event listener never wedges anything (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  const open: { close(force?: boolean): Promise<void> }[] = [];
  let rejections: unknown[] = [];
  let warnings: string[] = [];
  const onRejection = (reason: unknown): void => void rejections.push(reason);
  const emitWarning = process.emitWarning;

  beforeEach(() => {
    rejections = [];
    warnings = [];
    process.on('unhandledRejection', onRejection);
    // the warnings glidemq reports are collected here instead of printed
    process.emitWarning = ((w: string | Error) => void warnings.push(String(w))) as typeof process.emitWarning;
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((o) => o.close(true)));
    await h.cleanup();
    process.off('unhandledRejection', onRejection);
    process.emitWarning = emitWarning;
    expect(rejections, 'unhandled rejections').to.deep.equal([]);
  });

  it('Worker: throws from active, progress, completed and failed listeners; every job completes', async () => {
    const name = uniqueQueue('throws');
    const q = h.queue(name);
    const total = 12;
    const failOnce = new Set([1, 4, 7, 10]);
    for (let i = 0; i < total; i++) await q.add('j', { i }, { attempts: 2 });
    const ledger = new ThrowLedger();
    const progressed: number[] = [];
    // concurrency 2: each finish hands back the worker's next claims, which must still run
    const w = new Worker(
      name,
      async (job: Job) => {
        const stored = await job.updateProgress(50);
        expect(stored).to.equal(true);
        progressed.push(job.data.i);
        if (failOnce.has(job.data.i) && job.attemptsMade === 0) throw new Error('first attempt fails');
        return job.data.i;
      },
      { connection: server().url, blockTimeout: 1000, concurrency: 2 },
    );
    open.push(w);
    w.on('error', ledger.onError);
    const events = ['active', 'progress', 'completed', 'failed'];
    for (const event of events) w.on(event, ledger.thrower(event));
    // a listener after the throwing one still runs
    const completedIds = new Set<string>();
    w.on('completed', (job: Job) => void completedIds.add(job.id));

    await waitFor(async () => (await q.getJobCounts()).completed === total, `all ${total} jobs to complete`);
    await waitFor(() => completedIds.size === total, 'every completed event delivered');
    const counts = await q.getJobCounts();
    expect(counts).to.include({ completed: total, failed: 0, active: 0, waiting: 0, delayed: 0 });
    expect(w.activeCount).to.equal(0);
    expect(ledger.thrown.active).to.have.length(total + failOnce.size);
    expect(ledger.thrown.progress).to.have.length(total + failOnce.size);
    expect(ledger.thrown.completed).to.have.length(total);
    expect(ledger.thrown.failed).to.have.length(failOnce.size);
    expect(progressed).to.have.length(total + failOnce.size);
    ledger.expectOneErrorPerThrow(events);
    expect(ledger.otherErrors).to.deep.equal([]);
    const completed = await q.getJobs('completed', 0, -1);
    expect(completed.map((j) => j.returnvalue).sort((a, b) => a - b)).to.deep.equal([...Array(total).keys()]);
    for (const job of completed) expect(job.progress).to.equal(50);
    // the worker is still reading: a job added now runs too
    await q.add('late', { i: total });
    await waitFor(async () => (await q.getJobCounts()).completed === total + 1, 'a job added afterwards to complete');
  });

  it('Worker: an async listener that rejects arrives as one error event', async () => {
    const name = uniqueQueue('throws');
    const q = h.queue(name);
    const w = h.worker(name, async () => 'ok');
    const causes: unknown[] = [];
    w.on('error', (err: unknown) => {
      if (err instanceof ListenerError) causes.push(err.cause);
    });
    const rejected = new Error('async boom');
    w.on('completed', async () => {
      throw rejected;
    });
    await q.add('a', {});
    await waitFor(() => causes.length === 1, 'the rejection as an error event');
    expect(causes[0]).to.equal(rejected);
    expect((await q.getJobCounts()).completed).to.equal(1);
  });

  it('Worker: with no error listener, or one that throws itself, a throw is a warning and jobs go on', async () => {
    const name = uniqueQueue('throws');
    const q = h.queue(name);
    // no 'error' listener at all
    const bare = new Worker(name, async () => 'ok', { connection: server().url, blockTimeout: 1000 });
    open.push(bare);
    bare.on('active', () => {
      throw new Error('active listener of a worker with no error listener');
    });
    await q.add('a', {});
    await q.add('b', {});
    await waitFor(async () => (await q.getJobCounts()).completed === 2, 'both jobs to complete');
    await waitFor(() => warnings.filter((x) => /no 'error' listener/.test(x)).length === 2, 'one warning per throw');
    await bare.close();

    // an 'error' listener that throws too
    const name2 = uniqueQueue('throws');
    const q2 = h.queue(name2);
    const w = new Worker(name2, async () => 'ok', { connection: server().url, blockTimeout: 1000 });
    open.push(w);
    let errorCalls = 0;
    w.on('error', () => {
      errorCalls++;
      throw new Error('the error listener throws as well');
    });
    w.on('completed', () => {
      throw new Error('completed listener throws');
    });
    for (let i = 0; i < 3; i++) await q2.add('c', { i });
    await waitFor(async () => (await q2.getJobCounts()).completed === 3, 'all three jobs to complete');
    await waitFor(() => errorCalls === 3, 'one error event per throw');
    await waitFor(() => warnings.filter((x) => /'error' listener of Worker threw/.test(x)).length === 3, 'one warning per error listener throw');
  });

  it('BroadcastWorker: throws from active, completed and failed listeners; every message completes', async () => {
    const name = uniqueQueue('bc-throws');
    const b = new Broadcast(name, { connection: server().url });
    open.push(b);
    const total = 8;
    const failOnce = new Set([2, 5]);
    for (let i = 0; i < total; i++) await b.publish('orders.created', { i });
    const ledger = new ThrowLedger();
    const done = new Set<number>();
    const w = new BroadcastWorker(
      name,
      'billing',
      async (m: { data: { i: number }; attemptsMade: number }) => {
        if (failOnce.has(m.data.i) && m.attemptsMade === 0) throw new Error('first attempt fails');
        done.add(m.data.i);
        return m.data.i;
      },
      { connection: server().url, blockTimeout: 1000, startFrom: 'earliest', concurrency: 2, attempts: 2, retryInterval: 100 },
    );
    open.push(w);
    w.on('error', ledger.onError);
    const events = ['active', 'completed', 'failed'];
    for (const event of events) w.on(event, ledger.thrower(event));

    await waitFor(() => w.finished.completed === total, `all ${total} messages to complete`);
    expect(done.size).to.equal(total);
    expect(w.finished.failed).to.equal(0);
    expect(w.activeCount).to.equal(0);
    expect(ledger.thrown.active).to.have.length(total + failOnce.size);
    expect(ledger.thrown.completed).to.have.length(total);
    expect(ledger.thrown.failed).to.have.length(failOnce.size);
    ledger.expectOneErrorPerThrow(events);
    expect(ledger.otherErrors).to.deep.equal([]);
    const [sub] = (await b.subscriptions()).filter((s) => s.name === 'billing');
    expect(sub.pending).to.equal(0);
    // still reading: a message published now runs too
    await b.publish('orders.created', { i: total });
    await waitFor(() => w.finished.completed === total + 1, 'a message published afterwards to complete');
  });

  it('Queue and Broadcast: a throwing listener arrives as an error event, not at the emitter', async () => {
    const q = h.queue(uniqueQueue('throws'));
    const b = new Broadcast(uniqueQueue('bc-throws'), { connection: server().url });
    open.push(b);
    for (const emitter of [q, b]) {
      const arrived: ListenerError[] = [];
      emitter.on('error', (err: ListenerError) => void arrived.push(err));
      const thrown = new Error('listener bug');
      let after = 0;
      emitter.on('custom', () => {
        throw thrown;
      });
      emitter.on('custom', () => void after++);
      expect(emitter.emit('custom', 1)).to.equal(true);
      expect(after, 'the next listener still ran').to.equal(1);
      expect(arrived).to.have.length(1);
      expect(arrived[0]).to.be.instanceOf(ListenerError);
      expect(arrived[0].event).to.equal('custom');
      expect(arrived[0].cause).to.equal(thrown);
      expect(arrived[0].code).to.equal('ERR_LISTENER');
    }
    // they still work
    await q.add('x', {});
    expect((await q.getJobCounts()).waiting).to.equal(1);
    expect(await b.publish('a.b', {})).to.match(/^\d+-\d+$/);
  });
});
