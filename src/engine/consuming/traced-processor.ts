/**
 * The Worker's processor in a span per run when the `telemetry` option is on (README "Tracing";
 * the spans are shared/tracing.ts's): each run of a job is a consumer span, the child of its add's,
 * and a batch's run (the `batch` option) one span linked to each job's add. A sandboxed processor
 * is wrapped alike: the span is this process's, around the child's run (the child's job carries
 * the add's trace context in opts.telemetry.metadata, sandbox-job.ts). The Worker loads the tracing before its first job (Telemetry.load), so a
 * run makes its span with no await; a worker without the option never comes here.
 */
import type { Job } from '../jobs/job.js';
import type { Telemetry } from '../shared/telemetry.js';
import { readsArgumentsFreely, type HearsAborts, type Processor } from './worker-runner.js';
import type { BatchProcessor } from './batch-runner.js';

/** Where the spans are made: the queue's name and the worker's consumer name. */
interface TraceSite {
  telemetry: Telemetry;
  queue: string;
  consumer: string;
}

/** A job's processor whose every run is a consumer span. */
export function traceProcessor<D, R>(site: TraceSite, processor: Processor<D, R>): Processor<D, R> {
  const { telemetry, queue, consumer } = site;
  const traced = async (job: Job<D, R>, token?: string, signal?: AbortSignal): Promise<R> => {
    const tracing = telemetry.loaded ?? (await telemetry.load());
    return tracing.process(queue, consumer, job, () => processor(job, token, signal));
  };
  // the runner makes an AbortSignal per run only for a processor that may read one (worker-runner.ts
  // takesSignal): the wrapper declares three parameters when the processor may, else its count
  const length = processor.length === 0 && readsArgumentsFreely(processor) ? 3 : processor.length;
  Object.defineProperty(traced, 'length', { value: length });
  // a processor's own abort hook stays its own (the sandbox's: worker-runner.ts HearsAborts)
  (traced as HearsAborts).onAbort = (processor as HearsAborts).onAbort;
  return traced;
}

/** A batch processor whose every run is one consumer span, linked to the add of each of its jobs. */
export function traceBatchProcessor<D, R>(site: TraceSite, processor: BatchProcessor<D, R>): BatchProcessor<D, R> {
  const { telemetry, queue, consumer } = site;
  return async (jobs: Job<D, R>[], signal: AbortSignal): Promise<R[]> => {
    const tracing = telemetry.loaded ?? (await telemetry.load());
    return tracing.processBatch(queue, consumer, jobs, () => processor(jobs, signal));
  };
}
