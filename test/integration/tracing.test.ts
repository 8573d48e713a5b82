/**
 * OpenTelemetry tracing (the `telemetry` option; src/engine/shared/tracing.ts): an add's producer
 * span is the parent of every run of its job, across a real worker; a bulk is one span; a flow
 * links each parent to its children; failures are recorded; and with tracing off
 * @opentelemetry/api is never loaded and nothing is stored with the job. Spans are read from the
 * SDK's in-memory exporter.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { context, propagation, SpanKind, SpanStatusCode, trace, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker, type WorkerOptions } from '../../src/engine/consuming/worker.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { chain, chord, dag, group } from '../../src/engine/flows/dag.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';
import { processorPath } from '../helpers/worker-spawn.js';
import { REPO_ROOT } from '../helpers/fixtures.js';

const FAST: WorkerOptions = { blockTimeout: 1000, lockDuration: 2000, stalledInterval: 1000 };

describe('tracing: the telemetry option (real valkey-server, in-memory exporter)', function () {
  this.timeout(30_000);
  const server = useServer();
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const open: { close(): Promise<void> }[] = [];

  before(() => {
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  });
  after(async () => {
    trace.disable();
    context.disable();
    propagation.disable();
    await provider.shutdown();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((o) => o.close()));
    exporter.reset();
  });

  function queue(name: string, telemetry: unknown = true): Queue {
    const q = new Queue(name, { connection: server().url, telemetry: telemetry as boolean });
    open.push(q);
    return q;
  }

  function worker(name: string, processor: any, opts: WorkerOptions = {}): Worker {
    const w = new Worker(name, processor, { connection: server().url, telemetry: true, ...FAST, ...opts });
    w.on('error', () => undefined);
    open.push({ close: () => w.close(true) });
    return w;
  }

  const spans = (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name === name);
  const ctxOf = (s: ReadableSpan): SpanContext => s.spanContext();
  /** Whether `child`'s parent is `parent`, in the same trace. */
  const isChild = (child: ReadableSpan, parent: ReadableSpan) =>
    child.parentSpanContext?.spanId === ctxOf(parent).spanId && ctxOf(child).traceId === ctxOf(parent).traceId;

  it('an add is a producer span in the caller\'s trace, and the run a consumer span, its child, across a real worker', async () => {
    const name = uniqueQueue('trace-add');
    const q = queue(name);
    const outer = trace.getTracer('app').startSpan('request');
    const job = await context.with(trace.setSpan(context.active(), outer), () => q.add('email', { to: 'a' }));
    outer.end();
    let inner: ReadableSpan['spanContext'] | undefined;
    const w = worker(name, async (j: Job) => {
      // the processor's own spans are children of the run's
      const s = trace.getTracer('app').startSpan('send-mail');
      inner = () => s.spanContext();
      s.end();
      return j.data.to;
    });
    await waitFor(() => w.finished.completed === 1, 'the job completed');
    const [add] = spans(`add ${name}`);
    const [run] = spans(`process ${name}`);
    const [request] = spans('request');
    expect(add.kind).to.equal(SpanKind.PRODUCER);
    expect(isChild(add, request)).to.equal(true);
    expect(add.attributes).to.include({
      'messaging.system': 'glidemq',
      'messaging.destination.name': name,
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'add',
      'messaging.message.id': job.id,
      'glidemq.job.name': 'email',
    });
    expect(run.kind).to.equal(SpanKind.CONSUMER);
    expect(isChild(run, add)).to.equal(true);
    expect(run.attributes).to.include({
      'messaging.system': 'glidemq',
      'messaging.destination.name': name,
      'messaging.operation.type': 'process',
      'messaging.message.id': job.id,
      'messaging.client.id': w.consumer,
      'glidemq.job.attempt': 1,
    });
    expect(run.status.code).to.equal(SpanStatusCode.OK);
    const mail = spans('send-mail')[0];
    expect(mail.parentSpanContext?.spanId).to.equal(ctxOf(run).spanId);
    expect(inner!().traceId).to.equal(ctxOf(add).traceId);
    // what the job stores: BullMQ's opts.telemetry.metadata, a carrier naming the add's span
    const stored = (await q.getJob(job.id))!.opts.telemetry!;
    expect(JSON.parse(stored.metadata!).traceparent).to.match(new RegExp(`^00-${ctxOf(add).traceId}-${ctxOf(add).spanId}-01$`));
  });

  it('each attempt is a span of its own under the add, its attempt named, a failure recorded with status ERROR', async () => {
    const name = uniqueQueue('trace-retry');
    const q = queue(name);
    await q.add('flaky', {}, { attempts: 3 });
    const w = worker(name, async (j: Job) => {
      if (j.attemptsMade < 2) throw new Error(`boom ${j.attemptsMade + 1}`);
      return 'ok';
    });
    await waitFor(() => w.finished.completed === 1, 'the third attempt completed');
    const [add] = spans(`add ${name}`);
    const runs = spans(`process ${name}`).sort((a, b) => Number(a.attributes['glidemq.job.attempt']) - Number(b.attributes['glidemq.job.attempt']));
    expect(runs.map((r) => r.attributes['glidemq.job.attempt'])).to.deep.equal([1, 2, 3]);
    expect(runs.every((r) => isChild(r, add) && r.attributes['glidemq.job.attempts'] === 3)).to.equal(true);
    expect(runs.map((r) => r.status.code)).to.deep.equal([SpanStatusCode.ERROR, SpanStatusCode.ERROR, SpanStatusCode.OK]);
    expect(runs[0].status.message).to.equal('boom 1');
    const exception = runs[1].events.find((e) => e.name === 'exception');
    expect(exception?.attributes?.['exception.message']).to.equal('boom 2');
  });

  it('a bulk add is one span, the parent of every job\'s run, and its jobs keep sharing their options', async () => {
    const name = uniqueQueue('trace-bulk');
    const q = queue(name);
    const jobs = await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'b', data: { i } })));
    const w = worker(name, async () => 'done');
    await waitFor(() => w.finished.completed === 5, 'the bulk completed');
    const bulk = spans(`addBulk ${name}`);
    expect(bulk).to.have.length(1);
    expect(bulk[0].attributes['messaging.batch.message_count']).to.equal(5);
    expect(bulk[0].attributes['glidemq.job.ids']).to.deep.equal(jobs.map((j) => j.id));
    const runs = spans(`process ${name}`);
    expect(runs.map((r) => r.attributes['messaging.message.id']).sort()).to.deep.equal(jobs.map((j) => j.id).sort());
    expect(runs.every((r) => isChild(r, bulk[0]))).to.equal(true);
    expect(spans(`add ${name}`)).to.have.length(0);
    // one context for the whole bulk: its jobs' options stay alike (glidemq_addData's fast path)
    const stored = await Promise.all(jobs.map(async (j) => (await q.getJob(j.id))!.opts.telemetry?.metadata));
    expect(new Set(stored).size).to.equal(1);
    expect(JSON.parse(stored[0]!).traceparent).to.include(ctxOf(bulk[0]).spanId);
  });

  it('a flow is one span with a create span per job; a parent links its children, and so does its run', async () => {
    const name = uniqueQueue('trace-flow');
    const flows = new FlowProducer({ connection: server().url, telemetry: true });
    open.push(flows);
    const tree = await flows.add({
      name: 'parent', queueName: name, data: {},
      children: [{ name: 'c1', queueName: name, data: {} }, { name: 'c2', queueName: name, data: {} }],
    });
    const w = worker(name, async () => 'ok');
    await waitFor(() => w.finished.completed === 3, 'children and then the parent completed');
    const [flow] = spans(`addFlow ${name}`);
    const creates = spans(`create ${name}`);
    expect(creates).to.have.length(3);
    expect(creates.every((c) => isChild(c, flow))).to.equal(true);
    const byId = (id: string, list: ReadableSpan[]) => list.find((s) => s.attributes['messaging.message.id'] === id)!;
    const childIds = tree.children!.map((c) => c.job.id);
    const parentCreate = byId(tree.job.id, creates);
    const childCreates = childIds.map((id) => byId(id, creates));
    const linked = (s: ReadableSpan) => s.links.map((l) => l.context.spanId).sort();
    expect(linked(parentCreate)).to.deep.equal(childCreates.map((c) => ctxOf(c).spanId).sort());
    const runs = spans(`process ${name}`);
    const parentRun = byId(tree.job.id, runs);
    expect(isChild(parentRun, parentCreate)).to.equal(true);
    expect(linked(parentRun)).to.deep.equal(linked(parentCreate));
    for (const [i, id] of childIds.entries()) expect(isChild(byId(id, runs), childCreates[i])).to.equal(true);
  });

  it('a child added to an existing parent links the parent\'s add; dag, chain, group and chord take the telemetry option', async () => {
    const name = uniqueQueue('trace-child');
    const q = queue(name);
    const parent = await q.add('parent', {});
    await q.add('child', {}, { parent: { id: parent.id, queue: q.keys.base } });
    const [parentAdd] = spans(`add ${name}`).filter((s) => s.attributes['glidemq.job.name'] === 'parent');
    const [childAdd] = spans(`add ${name}`).filter((s) => s.attributes['glidemq.job.name'] === 'child');
    expect(childAdd.links.map((l) => [l.context.spanId, l.attributes?.['glidemq.parent.id']])).to.deep.equal([[ctxOf(parentAdd).spanId, parent.id]]);

    const url = server().url;
    const flows = [
      await dag([{ name: 'a', queueName: name }, { name: 'b', queueName: name, deps: ['a'] }], url, undefined, { telemetry: true }),
      await chain(name, [{ name: 's2' }, { name: 's1' }], url, undefined, { telemetry: true }),
      await group(name, [{ name: 'g1' }, { name: 'g2' }], url, undefined, { telemetry: true }),
      await chord(name, [{ name: 'c1' }], { name: 'cb' }, url, undefined, { telemetry: true }),
      await chain(name, [{ name: 'untraced' }], url),
    ];
    await Promise.all(flows.map((f) => f.close()));
    expect(spans(`addFlow ${name}`).map((s) => s.attributes['messaging.batch.message_count'])).to.deep.equal([2, 2, 3, 2]);
  });

  it('uses the registered propagator, and the option { tracer } with BullMQ\'s job option omitContext', async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    try {
      const name = uniqueQueue('trace-own');
      const q = queue(name, { tracer: provider.getTracer('mine') });
      const a = await q.add('linked', {});
      const b = await q.add('alone', {}, { telemetry: { omitContext: true } });
      const w = worker(name, async () => 'ok');
      await waitFor(() => w.finished.completed === 2, 'both completed');
      const adds = spans(`add ${name}`);
      expect(adds.every((s) => s.instrumentationScope.name === 'mine')).to.equal(true);
      const runs = spans(`process ${name}`);
      const runOf = (id: string) => runs.find((r) => r.attributes['messaging.message.id'] === id)!;
      const addOf = (id: string) => adds.find((s) => s.attributes['messaging.message.id'] === id)!;
      expect(isChild(runOf(a.id), addOf(a.id))).to.equal(true);
      expect(runOf(b.id).parentSpanContext).to.equal(undefined); // a trace of its own
      expect((await q.getJob(b.id))!.opts.telemetry).to.equal(undefined);
      // BullMQ's telemetry object (bullmq-otel's BullMQOtel) stands for the global provider, by its tracerName
      const bull = queue(name, { tracerName: 'from-bullmq', contextManager: {}, tracer: { startSpan() {} } });
      await bull.add('bull', {});
      expect(spans(`add ${name}`).filter((s) => s.instrumentationScope.name === 'from-bullmq')).to.have.length(1);
    } finally {
      propagation.disable();
    }
  });

  it('a batch run is one span linked to each job\'s add; a sandboxed run is a span around the child\'s run', async () => {
    const name = uniqueQueue('trace-batch');
    const q = queue(name);
    const added = await Promise.all([1, 2, 3].map((i) => q.add('j', { i })));
    const w = worker(name, async (jobs: Job[]) => jobs.map(() => 'ok'), { batch: { size: 3, timeout: 1000 } });
    await waitFor(() => w.finished.completed === 3, 'the batch completed');
    const [batch] = spans(`process ${name}`);
    expect(batch.attributes['messaging.batch.message_count']).to.equal(3);
    expect(batch.links.map((l) => l.context.spanId).sort()).to.deep.equal(spans(`add ${name}`).map((s) => ctxOf(s).spanId).sort());
    expect([...(batch.attributes['glidemq.job.ids'] as string[])].sort()).to.deep.equal(added.map((j) => j.id).sort());

    const boxed = uniqueQueue('trace-sandbox');
    const bq = queue(boxed);
    const job = await bq.add('carrier', { x: 1 });
    const sw = worker(boxed, processorPath('trace-carrier.mjs'), { useWorkerThreads: true });
    await waitFor(() => sw.finished.completed === 1, 'the sandboxed job completed');
    const [run] = spans(`process ${boxed}`);
    expect(run.attributes['messaging.message.id']).to.equal(job.id);
    expect(isChild(run, spans(`add ${boxed}`)[0])).to.equal(true);
    // the sandboxed job carries the very context the run's span is a child of
    const { metadata } = (await bq.getJob(job.id))!.returnvalue as { metadata: string };
    expect(JSON.parse(metadata).traceparent).to.equal(`00-${ctxOf(run).traceId}-${run.parentSpanContext!.spanId}-01`);
  });

  it('a traced sandboxed run still hears its abort: a child stuck in a loop is killed after the grace, and the job fails with the reason', async () => {
    const name = uniqueQueue('trace-sandbox-abort');
    const q = queue(name);
    const { id } = await q.add('act', { act: 'loop' });
    const w = worker(name, processorPath('sandbox-acts.mjs'), { sandbox: { abortGraceMs: 200 } });
    const failed: string[] = [];
    w.on('failed', (_job: Job | undefined, err: Error) => failed.push(err.message));
    await waitFor(() => w.activeCount === 1, 'the loop runs');
    expect(w.cancelJob(id, 'stop it')).to.equal(true);
    await waitFor(() => failed.length === 1, 'the job fails', 10_000);
    expect(failed).to.deep.equal(['stop it']);
  });

  it('refuses a telemetry option it cannot use, naming it', () => {
    expect(() => new Queue('x', { connection: server().url, telemetry: 5 as never })).to.throw(InvalidArgumentError, /telemetry must be true, false or \{ tracer \}/);
    expect(() => new FlowProducer({ connection: server().url, telemetry: { tracer: {} } as never })).to.throw(InvalidArgumentError, /telemetry\.tracer must be an OpenTelemetry Tracer/);
  });

  it('with tracing off, @opentelemetry/api is never loaded (adds, flows, runs) and nothing is stored with the job', async () => {
    const name = uniqueQueue('trace-off');
    const log = join(mkdtempSync(join(tmpdir(), 'glidemq-trace-')), 'loaded.txt');
    // a child process whose module resolution is watched from its first import: a line per module of
    // OpenTelemetry or glidemq's tracing that anything loads. It works with tracing off, then adds
    // one job with tracing on, so the watch is seen to work.
    const hook = `import { appendFileSync } from 'node:fs'; let log;
      export function initialize(d) { log = d.log; appendFileSync(log, ''); }
      export async function resolve(s, c, next) { const r = await next(s, c);
        if (/opentelemetry|shared\\/tracing\\.js/.test(r.url)) appendFileSync(log, r.url + '\\n'); return r; }`;
    const script = `
      import { register } from 'node:module';
      import { readFileSync } from 'node:fs';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}), { data: { log: ${JSON.stringify(log)} } });
      const { Queue, Worker, FlowProducer } = await import(${JSON.stringify(pathToFileURL(join(REPO_ROOT, 'dist/src/index.js')).href)});
      const opts = { connection: ${JSON.stringify(server().url)} };
      const q = new Queue(${JSON.stringify(name)}, opts);
      const job = await q.add('one', {});
      await q.addBulk([{ name: 'two', data: {} }]);
      const flows = new FlowProducer(opts);
      await flows.add({ name: 'p', queueName: ${JSON.stringify(name)}, children: [{ name: 'c', queueName: ${JSON.stringify(name)} }] });
      let done = 0;
      const w = new Worker(${JSON.stringify(name)}, async () => { done++; }, { ...opts, blockTimeout: 1000 });
      while (done < 4) await new Promise((r) => setTimeout(r, 20));
      await w.close(); await flows.close();
      const off = readFileSync(${JSON.stringify(log)}, 'utf8');
      const stored = (await q.getJob(job.id)).opts;
      const traced = new Queue(${JSON.stringify(name)}, { ...opts, telemetry: true });
      await traced.add('three', {});
      const on = readFileSync(${JSON.stringify(log)}, 'utf8');
      await q.obliterate({ force: true }); await q.close(); await traced.close();
      console.log(JSON.stringify({ off, stored, on }));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status, r.stderr).to.equal(0);
    const { off, stored, on } = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(off).to.equal('');
    expect(stored).to.not.have.property('telemetry');
    expect(on).to.match(/@opentelemetry\/api/);
  });
});
