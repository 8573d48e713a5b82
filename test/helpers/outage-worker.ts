/**
 * A worker in its own process for the outage tests (test/helpers/outage.ts starts it):
 * `node dist/test/helpers/outage-worker.js` with an OutageWorkerConfig as JSON in
 * GLIDEMQ_OUTAGE_WORKER. Its processor runs a job for `data.ms` milliseconds (optionally blocking
 * the event loop with a busy loop for `data.blockMs` of them) and writes one JSON line to stdout per
 * thing that happened, each stamped with Date.now() (the machine's clock, shared by every process
 * of the test):
 *   {"e":"ready"}
 *   {"e":"start","id","fence","t","running","active"}   the processor was called (running: processors
 *                                                        running in this process now, this one included;
 *                                                        active: worker.activeCount at that moment)
 *   {"e":"end","id","fence","t"}                        the processor returned
 *   {"e":"block","id","t","ms"}                         a busy loop of `ms` ended at t
 *   {"e":"over","t","running","active"}                 a sample saw more than `concurrency` running or active
 *   {"e":"completed"|"failed"|"stalled"|"lockLost"|"lost","id","t",...}  worker events
 *   {"e":"error","t","msg"}                             a worker 'error' event (expected while the server is down)
 * Ended by the test with SIGKILL (nothing to hand back: by then every job is finished).
 */
import { Worker, type Processor } from '../../src/engine/consuming/worker.js';

export interface OutageWorkerConfig {
  url: string;
  queue: string;
  concurrency: number;
  lockDuration: number;
  stalledInterval: number;
  blockTimeout: number;
  /** Least time the event loop runs freely between two busy loops of this process (ms). */
  blockGapMs?: number;
}

export interface OutageJobData {
  /** The job's run length (ms). */
  ms: number;
  /** A busy loop this long (ms) inside the run, starting `blockAtMs` after the start. */
  blockMs?: number;
  blockAtMs?: number;
}

/** A line the worker writes (the fields the parent reads). */
export interface OutageLine {
  e: string;
  t: number;
  id?: string;
  fence?: string;
  running?: number;
  active?: number;
  ms?: number;
  how?: string;
  status?: string;
  reason?: string;
  msg?: string;
}

function say(line: Omit<OutageLine, 't'>): void {
  process.stdout.write(JSON.stringify({ ...line, t: Date.now() }) + '\n');
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.GLIDEMQ_OUTAGE_WORKER ?? '{}') as OutageWorkerConfig;
  let running = 0;
  let lastBlockEnd = 0;
  let worker: Worker<OutageJobData> | undefined;

  const processor: Processor<OutageJobData> = async (job) => {
    const fence = job.claim?.fence ?? '';
    running++;
    const began = Date.now();
    say({ e: 'start', id: job.id, fence, running, active: worker?.activeCount ?? -1 });
    try {
      const d = job.data;
      if (d.blockMs && d.blockMs > 0) {
        await sleep(d.blockAtMs ?? 0);
        // one busy loop at a time, with the loop free for blockGapMs between two (checked right
        // before blocking, so two runs whose timers fire together do not block back to back)
        const gap = cfg.blockGapMs ?? 0;
        while (Date.now() - lastBlockEnd < gap) await sleep(gap - (Date.now() - lastBlockEnd));
        const from = performance.now();
        while (performance.now() - from < d.blockMs) {
          /* the event loop is blocked on purpose */
        }
        lastBlockEnd = Date.now();
        say({ e: 'block', id: job.id, ms: Math.round(performance.now() - from) });
      }
      await sleep(d.ms - (Date.now() - began));
      return { id: job.id, fence };
    } finally {
      running--;
      say({ e: 'end', id: job.id, fence });
    }
  };

  worker = new Worker<OutageJobData>(cfg.queue, processor, {
    connection: cfg.url,
    concurrency: cfg.concurrency,
    lockDuration: cfg.lockDuration,
    stalledInterval: cfg.stalledInterval,
    blockTimeout: cfg.blockTimeout,
    autorun: false,
  });
  const w = worker;
  w.on('completed', (job: { id: string }) => say({ e: 'completed', id: job.id }));
  w.on('failed', (job: { id: string; failedReason?: string | null }, err: Error | undefined) =>
    say({ e: 'failed', id: job.id, reason: err?.message ?? job.failedReason ?? '' }),
  );
  w.on('stalled', (id: string, _prev: string, how: string) => say({ e: 'stalled', id, how }));
  w.on('lockLost', (id: string) => say({ e: 'lockLost', id }));
  w.on('lost', (job: { id: string }, status: string) => say({ e: 'lost', id: job.id, status }));
  w.on('error', (err: unknown) => say({ e: 'error', msg: err instanceof Error ? err.message : String(err) }));

  // activeCount between starts and ends: a sample that sees more than the concurrency is reported
  setInterval(() => {
    if (w.activeCount > cfg.concurrency || running > cfg.concurrency) say({ e: 'over', running, active: w.activeCount });
  }, 20).unref();

  w.run().catch(() => undefined); // settles at close; a start-up failure rejects waitUntilReady too
  await w.waitUntilReady();
  say({ e: 'ready' });
}

main().catch((err) => {
  process.stderr.write(`outage-worker: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(2);
});
