/**
 * How big and how long a load run is. The normal suite runs a short form (about half a minute);
 * GLIDEMQ_SOAK=1 runs the long form for $GLIDEMQ_SOAK_MINUTES (default 10) with more processes.
 */
import type { RetentionRule } from './job-mix.js';
import type { QueueCaps } from './report.js';

export interface QueuePlan {
  name: string;
  retention: RetentionRule;
  caps: QueueCaps;
  /** Producer child processes, plus one producer in the test's own process when `inProcessProducer`. */
  producerProcesses: number;
  inProcessProducer: boolean;
  /** `glidemq worker` CLI processes, plus one engine Worker in the test's process when `inProcessWorker`. */
  cliWorkers: number;
  inProcessWorker: boolean;
}

export interface LoadPlan {
  soak: boolean;
  runMs: number;
  warmupMs: number;
  intervalMs: number;
  ratePerProducer: number;
  batch: number;
  highWater: number;
  concurrency: number;
  queues: QueuePlan[];
}

export function loadPlan(env = process.env): LoadPlan {
  const soak = env.GLIDEMQ_SOAK === '1';
  const minutes = Number(env.GLIDEMQ_SOAK_MINUTES ?? 10);
  if (soak && !(minutes > 0)) throw new Error(`GLIDEMQ_SOAK_MINUTES must be a positive number, got "${env.GLIDEMQ_SOAK_MINUTES}"`);
  const scale = soak ? 2 : 1;
  const highWater = 1000;
  const batch = 25;
  const stream = highWater + 4 * batch * scale + 200; // backlog + one bulk per producer + claims in flight
  return {
    soak,
    runMs: soak ? Math.round(minutes * 60_000) : 20_000, // short form: 7 samples after the warm-up, enough for thirds
    warmupMs: soak ? 30_000 : 6_000,
    intervalMs: soak ? 10_000 : 2_000,
    ratePerProducer: 300,
    batch,
    highWater,
    concurrency: 8,
    queues: [
      {
        name: 'load-count',
        retention: { removeOnComplete: { count: 300 }, removeOnFail: { count: 100 } },
        caps: { completedCount: 300, failedCount: 100, stream },
        producerProcesses: scale,
        inProcessProducer: true,
        cliWorkers: scale,
        inProcessWorker: true,
      },
      {
        name: 'load-age',
        retention: { removeOnComplete: { age: 2 }, removeOnFail: { age: 3 } }, // seconds (BullMQ's KeepJobs)
        caps: { completedAgeMs: 2000, failedAgeMs: 3000, stream },
        producerProcesses: 2 * scale,
        inProcessProducer: false,
        cliWorkers: 2 * scale,
        inProcessWorker: false,
      },
    ],
  };
}
