/**
 * `glidemq worker <script> --broadcast <name> --subscription <sub>`: the worker command's broadcast
 * mode. The script's function gets each message ({id, subject, data, timestamp, subscription,
 * attemptsMade, stalledCount}) of the subscription; the options shared with queue workers mean the
 * same here.
 */
import { Broadcast, type BroadcastMessage } from '../engine/broadcast.js';
import { BroadcastWorker, type BroadcastProcessor, type BroadcastWorkerOptions } from '../engine/broadcast-worker.js';
import { parseInteger } from '../engine/duration.js';
import { invalid } from '../engine/errors.js';
import type { WorkerOptions } from '../engine/worker.js';
import type { CommandContext } from './context.js';
import { colour, print, printError, printJsonLine } from './output.js';
import { exitWhenIdle, manageLifecycle, whenClosed } from './worker-lifecycle.js';

export interface BroadcastFlags {
  broadcast?: string;
  subscription?: string;
  subjects?: string;
  attempts?: string;
  backoff?: string;
  startFrom?: string;
}

export interface BroadcastRunLimits {
  maxJobs?: number;
  exitWhenIdle: boolean;
  failFast: boolean;
}

/** The broadcast options from the flags; the queue-worker options (connection, timings) carry over. */
export function broadcastWorkerOptions(base: WorkerOptions, f: BroadcastFlags): BroadcastWorkerOptions {
  if (!f.broadcast || !f.subscription) throw invalid('--broadcast <name> and --subscription <name> go together');
  if (base.globalConcurrency !== undefined) throw invalid('--global-concurrency applies to queues, not to a broadcast subscription');
  if (f.startFrom !== undefined && !['latest', 'earliest'].includes(f.startFrom) && !/^\d+(-\d+)?$/.test(f.startFrom)) {
    throw invalid(`--start-from must be latest, earliest or a stream entry id, got "${f.startFrom}"`);
  }
  return {
    connection: base.connection,
    prefix: base.prefix,
    concurrency: base.concurrency,
    lockDuration: base.lockDuration,
    stalledInterval: base.stalledInterval,
    maxStalledCount: base.maxStalledCount,
    blockTimeout: base.blockTimeout,
    ...(f.subjects ? { subjects: f.subjects.split(',').map((s) => s.trim()).filter(Boolean) } : {}),
    ...(f.attempts ? { attempts: parseInteger(f.attempts, '--attempts', 1, 1_000_000) } : {}),
    ...(f.backoff ? { backoff: f.backoff } : {}),
    ...(f.startFrom ? { startFrom: f.startFrom } : {}),
  };
}

export async function runBroadcastWorker(
  ctx: CommandContext,
  processor: (arg: never) => unknown,
  f: BroadcastFlags,
  opts: BroadcastWorkerOptions,
  limits: BroadcastRunLimits,
): Promise<number> {
  const name = f.broadcast as string;
  const sub = f.subscription as string;
  const worker = new BroadcastWorker(name, sub, processor as unknown as BroadcastProcessor, { ...opts, autorun: false });
  let finished = 0;
  let failedForGood = 0;
  const life = manageLifecycle(worker);
  const stop = () => life.stop();

  const report = (m: BroadcastMessage, status: 'completed' | 'failed', durationMs: number, err?: Error, willRetry = false) => {
    if (ctx.json) {
      printJsonLine({
        id: m.id, subject: m.subject, subscription: sub, status, durationMs, attemptsMade: m.attemptsMade + 1,
        ...(status === 'failed' ? { failedReason: err?.message ?? '', willRetry } : {}),
      });
    } else if (status === 'completed') {
      print(`${colour.green('✓')} ${m.id} ${m.subject} ${colour.dim(`${durationMs} ms`)}`);
    } else {
      print(`${colour.red('✗')} ${m.id} ${m.subject} ${colour.dim(`${durationMs} ms`)} ${err?.message ?? ''}${willRetry ? colour.dim(' (will retry)') : ''}`);
    }
  };
  const counted = () => {
    finished++;
    if (limits.maxJobs !== undefined && finished >= limits.maxJobs) void stop();
  };
  worker.on('completed', (m: BroadcastMessage, _r: unknown, ms: number) => {
    report(m, 'completed', ms);
    counted();
  });
  worker.on('failed', (m: BroadcastMessage, err: Error, ms: number, willRetry: boolean) => {
    report(m, 'failed', ms, err, willRetry);
    if (willRetry) return;
    failedForGood++;
    if (limits.failFast) void stop();
    counted();
  });
  worker.on('error', (err: Error) => printError(`worker: ${err.message}`));

  await worker.run();
  if (limits.exitWhenIdle) {
    // idle: this subscription has read every kept message and holds none unfinished
    const b = new Broadcast(name, { connection: opts.connection, prefix: opts.prefix });
    const nothingLeft = async () => {
      const s = (await b.subscriptions()).find((x) => x.name === sub);
      return !!s && s.lag === 0 && s.pending === 0;
    };
    exitWhenIdle(worker, life, nothingLeft, () => b.close());
  }
  await whenClosed(worker);
  return limits.failFast && failedForGood > 0 ? 1 : 0;
}
