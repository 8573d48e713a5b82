/**
 * The tracing rows (issue 32, README "Tracing"): glidemq's c=10 worker over a backlog with the
 * `telemetry` option off (`false`: must cost nothing) and on (a registered SDK tracer provider
 * with a batch processor and an exporter that drops the spans: the cost of making them, not of
 * shipping them), each against glidemq's own c=10 run without the option in the same round. As the
 * batch row, the target is on glidemq against itself: the rows' "BullMQ" column holds the baseline.
 */
import type { Redis } from 'ioredis';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Queue, Worker } from '../../src/index.js';
import { preload, processBacklog, type Sizes } from './figures.js';
import { glidemq, type System } from './systems.js';

/** glidemq with the telemetry option given to its queue (the preload) and its worker. */
function tracedSide(telemetry: boolean): System {
  return {
    ...glidemq,
    async producer(url, queue) {
      const q = new Queue(queue, { connection: url, telemetry });
      await q.waitUntilReady();
      return { addOne: (j) => q.add(j.name, j.data, j.opts), addBulk: (jobs) => q.addBulk(jobs), close: () => q.close() };
    },
    async worker(url, queue, concurrency, onCompleted) {
      const w = new Worker(queue, async () => null, { connection: url, concurrency, autorun: false, telemetry });
      w.on('completed', (job) => onCompleted(job.data));
      w.on('error', (err) => console.error(`glidemq traced worker error: ${String(err)}`));
      w.run().catch(() => undefined); // settles at close
      await w.waitUntilReady();
      return { close: () => w.close() };
    },
  };
}

/** Drops every span it is given (the cost measured is glidemq's and the SDK's, not an export's). */
const dropAll: SpanExporter = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => undefined };

/**
 * Jobs/s at c=10 without the option, with telemetry: false, and with telemetry: true, each over a
 * fresh backlog; the order turns round every other round (`reversed`), as the other rows' does.
 */
export async function tracingAgainstC10(url: string, admin: Redis, s: Sizes, reversed = false): Promise<{ base: number; off: number; on: number }> {
  const run = async (sys: System) => {
    await admin.flushall('SYNC');
    await preload(sys, url, s.backlog);
    return (await processBacklog(sys, url, 10, s)).rate;
  };
  const traced = async () => {
    const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropAll)] });
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    try {
      return await run(tracedSide(true));
    } finally {
      trace.disable();
      context.disable();
      await provider.shutdown();
    }
  };
  const r = { base: 0, off: 0, on: 0 };
  const steps: [keyof typeof r, () => Promise<number>][] = [['base', () => run(glidemq)], ['off', () => run(tracedSide(false))], ['on', traced]];
  for (const [key, step] of reversed ? steps.reverse() : steps) r[key] = await step();
  return r;
}
