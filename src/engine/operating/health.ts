/**
 * Health checks for cron and Kubernetes (`glidemq check ...`, as rabbitmq-diagnostics check_*):
 * each reads one figure of a queue, compares it with a threshold and says pass or fail. Read-only;
 * every age is measured by the server's clock.
 *
 *   backlog  jobs ready to run and waiting for a worker (waiting, paused, prioritized) <= max
 *   latency  age of the oldest waiting job <= max
 *   stuck    no claim idle longer than `older` (default: the lock duration) whose worker is not
 *            alive in the worker registry (a claim stalled recovery has not taken back yet), and
 *            no parent waiting for children longer than `older` whose dependencies are all
 *            settled (stuck-parents.ts)
 *   failed   failed attempts in the last `since` (per-minute metrics, whole minutes) <= max
 *   workers  live workers in the registry >= min
 *
 * checkQueues runs one check on every queue of a QueueSet (the named queues, or every queue under
 * the prefix), all over the set's one shared connection.
 */
import { invalid } from '../shared/errors.js';
import { DEFAULT_MAINTENANCE, Maintenance } from '../administering/maintenance.js';
import { METRICS_RETENTION_MINUTES, MINUTE_MS } from '../inspecting/metrics.js';
import type { Queue } from '../queue/queue.js';
import type { QueueSet } from './queue-set.js';
import { findStuckParents } from '../flows/stuck-parents.js';

export type CheckName = 'backlog' | 'latency' | 'stuck' | 'failed' | 'workers';

export interface CheckResult {
  check: CheckName;
  queue: string;
  ok: boolean;
  /** The figure read: jobs, ms, claims, attempts or workers. */
  actual: number;
  /** The limit it is compared with (ms for latency and stuck). */
  threshold: number;
  /** How actual and threshold compare for ok: `<=` (at most) or `>=` (at least). */
  rule: '<=' | '>=';
  /** What else was read, per check (the parts of a backlog, the stuck claims, the window...). */
  details: Record<string, unknown>;
}

/** One check over many queues: ok when every queue passes (and when there is no queue to check). */
export interface CheckReport {
  check: CheckName;
  ok: boolean;
  /** One result per queue, in the set's order. */
  queues: CheckResult[];
}

/** How many queues one checkQueues reads at a time (their calls pipelined on the shared connection). */
const QUEUES_AT_ONCE = 16;

/** Runs `run` (one of the checks below, its thresholds bound) on every queue of `set`. */
export async function checkQueues(set: QueueSet, check: CheckName, run: (q: Queue) => Promise<CheckResult>): Promise<CheckReport> {
  const names = await set.names();
  const queues: CheckResult[] = [];
  for (let i = 0; i < names.length; i += QUEUES_AT_ONCE) {
    queues.push(...(await Promise.all(names.slice(i, i + QUEUES_AT_ONCE).map((n) => run(set.get(n))))));
  }
  // No queue at all: the checks of an upper bound (backlog, latency, stuck, failed) have nothing
  // over their limit and pass; `workers` asks for at least some live workers, and there are none.
  const ok = queues.length > 0 ? queues.every((r) => r.ok) : check !== 'workers';
  return { check, ok, queues };
}

/** A stuck claim: its job, the consumer (worker) that holds it and how long it is idle. */
export interface StuckClaim {
  jobId: string;
  consumer: string;
  idleMs: number;
  kind: 'stream' | 'priority' | 'lifo' | 'group';
}

/** How many stuck claims a check lists by job (the count is always complete up to the read limit). */
const STUCK_LISTED = 20;
/** Most claims of each kind one stuck check reads. */
const CLAIMS_READ = 10_000;

function result(queue: Queue, check: CheckName, actual: number, threshold: number, rule: '<=' | '>=', details: Record<string, unknown> = {}): CheckResult {
  return { check, queue: queue.name, ok: rule === '<=' ? actual <= threshold : actual >= threshold, actual, threshold, rule, details };
}

function wholeAtLeast(n: number, min: number, what: string): number {
  if (!Number.isSafeInteger(n) || n < min) throw invalid(`${what} must be a whole number >= ${min}, got ${String(n)}`);
  return n;
}

/** Jobs ready to run that wait for a worker: waiting (paused or not) and prioritized. Delayed jobs are not due yet. */
export async function checkBacklog(queue: Queue, max: number): Promise<CheckResult> {
  wholeAtLeast(max, 0, 'backlog max');
  const c = await queue.getJobCounts();
  const waiting = c.waiting + c.paused;
  return result(queue, 'backlog', waiting + c.prioritized, max, '<=', { waiting, prioritized: c.prioritized, delayed: c.delayed, paused: c.isPaused });
}

/** The age of the oldest waiting job (0 when none waits), in ms. */
export async function checkLatency(queue: Queue, maxMs: number): Promise<CheckResult> {
  wholeAtLeast(maxMs, 0, 'latency max');
  const age = await queue.getOldestWaitingAge();
  return result(queue, 'latency', age ?? 0, maxMs, '<=', { waiting: age !== null });
}

/**
 * Claims idle at least `olderMs` (default the lock duration, 30 s) held by a consumer that is not
 * a live worker in the registry. A live worker's long job renews its claim, so it is not idle; a
 * claim of a dead worker is what stalled recovery takes back once a worker runs it. And parents
 * waiting for children at least `olderMs` whose dependencies are all settled (findStuckParents):
 * the actual figure counts both.
 */
export async function checkStuck(queue: Queue, olderMs: number = DEFAULT_MAINTENANCE.lockDuration): Promise<CheckResult> {
  wholeAtLeast(olderMs, 0, 'stuck older');
  await queue.waitUntilReady();
  const claims = await new Maintenance(queue.client, queue.keys).listClaims({ minIdle: olderMs, limit: CLAIMS_READ });
  const live = new Set((await queue.getWorkers()).map((w) => w.id));
  const all: StuckClaim[] = [
    ...claims.stream.map((c) => ({ jobId: c.jobId, consumer: c.consumer, idleMs: c.idleMs, kind: 'stream' as const })),
    ...claims.list.map((c) => ({ jobId: c.jobId, consumer: c.consumer, idleMs: c.idleMs, kind: c.kind })),
  ];
  const stuck = all.filter((c) => !live.has(c.consumer)).sort((a, b) => b.idleMs - a.idleMs);
  const parents = await findStuckParents(queue, olderMs, STUCK_LISTED);
  return result(queue, 'stuck', stuck.length + parents.count, 0, '<=', {
    olderMs,
    claims: stuck.slice(0, STUCK_LISTED),
    claimsOlder: all.length,
    liveWorkers: live.size,
    listTrusted: claims.listTrusted,
    stuckClaims: stuck.length,
    stuckParents: parents.count,
    parents: parents.parents,
    parentsWaiting: parents.waiting,
    parentsUnchecked: parents.unchecked,
  });
}

/** Failed attempts (retried ones included) in the last `sinceMs`, counted in whole minutes (up to 24 h). */
export async function checkFailed(queue: Queue, max: number, sinceMs: number): Promise<CheckResult> {
  wholeAtLeast(max, 0, 'failed max');
  if (!Number.isSafeInteger(sinceMs) || sinceMs < 1 || sinceMs > METRICS_RETENTION_MINUTES * MINUTE_MS) {
    throw invalid(`failed since must be a duration from 1ms to 24h (the metrics keep 24 hours), got ${String(sinceMs)} ms`);
  }
  const minutes = Math.ceil(sinceMs / MINUTE_MS);
  const m = await queue.getMetrics({ minutes });
  return result(queue, 'failed', m.failed, max, '<=', { minutes, from: m.from, completed: m.completed });
}

/** Live workers in the queue's registry. */
export async function checkWorkers(queue: Queue, min: number): Promise<CheckResult> {
  wholeAtLeast(min, 0, 'workers min');
  const workers = await queue.getWorkers();
  return result(queue, 'workers', workers.length, min, '>=', {
    workers: workers.map((w) => ({ id: w.id, host: w.host, pid: w.pid, running: w.running, lastSeen: w.lastSeen })),
  });
}
