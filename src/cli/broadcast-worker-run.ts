/**
 * `glidemq worker <script> --broadcast <name> --subscription <sub>`: the worker command's broadcast
 * mode. The script's function gets each message ({id, subject, data, timestamp, subscription,
 * attemptsMade, stalledCount}) of the subscription; the options shared with queue workers mean the
 * same here.
 */
import { Broadcast, type BroadcastMessage } from '../engine/broadcast/broadcast.js';
import { BroadcastWorker, type BroadcastProcessor, type BroadcastWorkerOptions } from '../engine/broadcast/broadcast-worker.js';
import { parseInteger } from '../engine/shared/duration.js';
import { invalid } from '../engine/shared/errors.js';
import type { WorkerOptions } from '../engine/consuming/worker.js';
import type { CommandContext } from './context.js';
import { runUntilStopped, type RunLimits } from './worker-lifecycle.js';

export interface BroadcastFlags {
  broadcast?: string;
  subscription?: string;
  subjects?: string;
  attempts?: string;
  backoff?: string;
  startFrom?: string;
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
    ...(base.confirm !== undefined ? { confirm: base.confirm } : {}),
    ...(f.subjects ? { subjects: f.subjects.split(',').map((s) => s.trim()).filter(Boolean) } : {}),
    ...(f.attempts ? { attempts: parseInteger(f.attempts, '--attempts', 1, 1_000_000) } : {}),
    ...(f.backoff ? { backoff: f.backoff } : {}),
    ...(f.startFrom ? { startFrom: f.startFrom } : {}),
  };
}

export function runBroadcastWorker(
  ctx: CommandContext,
  processor: (arg: never) => unknown,
  f: BroadcastFlags,
  opts: BroadcastWorkerOptions,
  limits: RunLimits,
  logJson: boolean,
): Promise<number> {
  const name = f.broadcast as string;
  const sub = f.subscription as string;
  const worker = new BroadcastWorker(name, sub, processor as unknown as BroadcastProcessor, { ...opts, autorun: false });
  return runUntilStopped(worker, {
    json: ctx.json,
    logJson,
    about: {
      label: `subscription ${sub} of broadcast ${name}`,
      fields: { broadcast: name, subscription: sub },
      server: ctx.where,
      concurrency: worker.settings.concurrency,
      unit: 'message',
    },
    limits,
    describe: (m: BroadcastMessage, err?: Error) => ({
      id: m.id, label: m.subject, fields: { subject: m.subject, subscription: sub }, attemptsMade: m.attemptsMade + 1,
      failedReason: err?.message ?? '', durationMs: Math.max(0, (m.finishedOn ?? 0) - (m.processedOn ?? 0)), willRetry: m.willRetry,
    }),
    idleCheck: () => {
      // idle: this subscription has read every kept message and holds none unfinished
      const b = new Broadcast(name, { connection: opts.connection, prefix: opts.prefix });
      const check = async () => {
        const s = (await b.subscriptions()).find((x) => x.name === sub);
        return { idle: !!s && s.lag === 0 && s.pending === 0 };
      };
      return { check, release: () => b.close() };
    },
  });
}
