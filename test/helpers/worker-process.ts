/**
 * A worker in its own process, for crash tests: `node dist/test/helpers/worker-process.js` with the
 * settings as JSON in GLIDEMQ_TEST_WORKER. It runs a Worker with a processor module from
 * fixtures/processors/ and reports on stdout, one JSON object per line:
 *   {"event":"ready"}                                  once the worker runs
 *   {"event":"active","id":"7"}                        a job started (before the processor runs)
 *   {"event":"completed"|"failed","id":"7"}            a job finished here
 * The test ends it with SIGKILL (a crash) or SIGTERM (graceful close, then exit 0).
 */
import { loadProcessor } from '../../src/cli/load-processor.js';
import { Worker, type WorkerOptions } from '../../src/engine/consuming/worker.js';

export interface WorkerProcessConfig {
  url: string;
  queue: string;
  prefix?: string;
  /** Path of a processor module (default export or module.exports is `async (job) => result`). */
  processor: string;
  options?: Omit<WorkerOptions, 'connection' | 'prefix'>;
}

function report(event: string, id?: string): void {
  process.stdout.write(JSON.stringify(id === undefined ? { event } : { event, id }) + '\n');
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.GLIDEMQ_TEST_WORKER ?? '{}') as WorkerProcessConfig;
  const processor = await loadProcessor(cfg.processor);
  const worker = new Worker(cfg.queue, processor, { ...cfg.options, connection: cfg.url, prefix: cfg.prefix, autorun: false });
  worker.on('active', (job: { id: string }) => report('active', job.id));
  worker.on('completed', (job: { id: string }) => report('completed', job.id));
  worker.on('failed', (job: { id: string }) => report('failed', job.id));
  worker.on('error', (err: Error) => process.stderr.write(`worker error: ${err.message}\n`));
  process.on('SIGTERM', () => {
    void worker.close().then(() => process.exit(0));
  });
  worker.run().catch(() => undefined); // settles at close; a start-up failure rejects waitUntilReady too
  await worker.waitUntilReady();
  report('ready');
}

main().catch((err) => {
  process.stderr.write(`worker-process: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(2);
});
