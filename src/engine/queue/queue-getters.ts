/**
 * The reading side of a queue (as BullMQ's QueueGetters): a job, its log and state, counts and
 * listings per state (src/engine/inspecting/job-queries.ts), groups, dedup ids, rate limits, workers, metrics
 * and schedulers. Nothing here writes.
 */
import { invalid } from '../shared/errors.js';
import { Job } from '../jobs/job.js';
import * as queries from '../inspecting/job-queries.js';
import type { JobCounts, JobStateName, JobType } from '../inspecting/job-queries.js';
import { getJobLogs } from '../jobs/job-edits.js';
import {
describeRecord,
parseRecord,toJobSchedulerJson,
type JobSchedulerJson,type SchedulerInfo
} from '../scheduling/schedulers.js';
import { buildMetrics, encodeRange, type MetricsRange, type QueueMetrics } from '../inspecting/metrics.js';
import { readGroupState, type GroupState } from '../producing/groups.js';
import { deduplicationJobId } from '../producing/dedup-queries.js';
import { rateLimitTtl } from '../administering/rate-limits.js';
import { listWorkers, oldestWaitingAge, type WorkerInfo } from '../consuming/worker-registry.js';
import { renderPrometheus, snapshotQueue } from '../inspecting/prometheus.js';
import { readLifetimeMetrics, type LifetimeMetrics } from '../inspecting/lifetime-metrics.js';
import { QueueBase } from './queue-base.js';
import { searchStep, type SearchOptions } from '../inspecting/job-search.js';

/** `start`..`end` of `ids`, inclusive, negative counting from the end (as ZRANGE and LRANGE take them). */
function page<T>(ids: T[], start: number, end: number): T[] {
  const from = start < 0 ? Math.max(0, ids.length + start) : start;
  const to = end < 0 ? ids.length + end : end;
  return to < from ? [] : ids.slice(from, to + 1);
}

/** Reads a queue; a job read here can change itself through the queue that read it (job.queue). */
export class QueueGetters extends QueueBase {
  async getJob(id: string): Promise<Job | undefined> {
    await this.waitUntilReady();
    const h = (await this.client.hgetall(this.keys.job(id))) as Record<string, string>;
    if (!h || Object.keys(h).length === 0) return undefined;
    const job = Job.fromFields({ ...h, id });
    job.queue = this; // it can change itself (job.updateData, remove, retry, ...) through this queue
    return job;
  }

  /** One group's limits, active count and holders, rate window, token bucket and waiting count. */
  async getGroup(id: string): Promise<GroupState | undefined> {
    await this.waitUntilReady();
    return readGroupState(this.client, this.keys, id);
  }

  /**
   * Lines `start`..`end` (inclusive; negative counts from the end) of job `id`'s log, oldest first,
   * or newest first when `asc` is false, and how many lines the log holds (BullMQ's form).
   */
  async getJobLogs(id: string, start = 0, end = -1, asc = true): Promise<{ logs: string[]; count: number }> {
    await this.waitUntilReady();
    return getJobLogs(this.client, this.keys, id, start, end, asc);
  }

  /** Job `id`'s state now, as BullMQ names it ('waiting' also in a paused queue), or 'unknown'. */
  async getJobState(id: string): Promise<JobStateName | 'unknown'> {
    await this.waitUntilReady();
    return queries.readJobState(this.client, this.keys, id);
  }

  /**
   * Jobs per type. With no types: every count, BullMQ's and glidemq's (consumers, isPaused,
   * listActive). With types: exactly the keys asked for, as spelled ('wait' or 'waiting', ...).
   * A paused queue's waiting jobs count under `paused`, `waiting` is 0 then; its prioritized jobs
   * stay under `prioritized`. One read-only server call (and one XINFO for `consumers`).
   */
  async getJobCounts(): Promise<JobCounts>;
  async getJobCounts(...types: JobType[]): Promise<Record<string, number>>;
  async getJobCounts(...types: JobType[]): Promise<JobCounts | Record<string, number>> {
    queries.checkTypes(types, 'getJobCounts');
    await this.waitUntilReady();
    return queries.readJobCounts(this, types);
  }

  /**
   * The jobs in any of `types`, each counted once (none: every type). 'waiting' counts every job
   * that waits, the queue paused or not, as BullMQ's getWaitingCount.
   */
  async getJobCountByTypes(...types: JobType[]): Promise<number> {
    queries.checkTypes(types, 'getJobCountByTypes');
    await this.waitUntilReady();
    return queries.countJobsOfTypes(this, types);
  }

  /** The jobs still to run: waiting (paused or not), delayed and prioritized, as BullMQ's count(). */
  count(): Promise<number> {
    return this.getJobCountByTypes('waiting', 'delayed', 'prioritized', 'waiting-children');
  }

  /** Jobs that wait, the queue paused or not (BullMQ: "waiting or paused"). */
  getWaitingCount(): Promise<number> {
    return this.getJobCountByTypes('waiting');
  }

  getActiveCount(): Promise<number> {
    return this.getJobCountByTypes('active');
  }

  /** Delayed jobs; with `timestamp` (ms), only those due strictly before it. */
  async getDelayedCount(timestamp?: number): Promise<number> {
    if (timestamp === undefined) return this.getJobCountByTypes('delayed');
    if (!Number.isSafeInteger(timestamp)) throw invalid(`getDelayedCount: timestamp must be a whole number of ms, got ${String(timestamp)}`);
    await this.waitUntilReady();
    return this.client.zcount(this.keys.scheduled, '-inf', `(${timestamp}`);
  }

  /** The delayed job due first and the ms until it is due by the server's clock (0: due now); undefined when none is delayed. */
  async getNextDelayed(): Promise<{ id: string; dueInMs: number } | undefined> {
    await this.waitUntilReady();
    const [first, now] = await Promise.all([this.client.zrange(this.keys.scheduled, '0', '0', 'WITHSCORES'), this.serverTime()]);
    if (first.length < 2) return undefined;
    return { id: first[0], dueInMs: Math.max(0, Number(first[1]) - now) };
  }

  getCompletedCount(): Promise<number> {
    return this.getJobCountByTypes('completed');
  }

  getFailedCount(): Promise<number> {
    return this.getJobCountByTypes('failed');
  }

  getPrioritizedCount(): Promise<number> {
    return this.getJobCountByTypes('prioritized');
  }

  /** Always 0: glidemq has no parent/child jobs (BullMQ's flows). */
  getWaitingChildrenCount(): Promise<number> {
    return this.getJobCountByTypes('waiting-children');
  }

  /**
   * The jobs of `types` (one or a list, BullMQ's names; none: every type), each type's page
   * `start`..`end` (inclusive; negative counts from the end) in turn, each job once. `asc` false
   * (the default, as BullMQ): newest first (last added, last activated, last finished, due last);
   * true: the order they run in (the next to run first), first finished first. 'waiting' ('wait')
   * lists every job that waits, paused or not, as getWaitingCount counts them: LIFO jobs, stream
   * entries not yet delivered, then the jobs waiting in groups (group by group, each in its order),
   * the ones drain removes; 'paused' the same while the queue is paused, none while it runs.
   */
  async getJobs(types?: JobType | JobType[], start = 0, end = -1, asc = false): Promise<Job[]> {
    const asked = queries.checkTypes(types, 'getJobs');
    queries.checkPage(start, end, 'getJobs');
    await this.waitUntilReady();
    return queries.listJobs(this, asked, start, end, !!asc);
  }

  /** Waiting jobs (the queue paused or not), the next to run first. */
  getWaiting(start = 0, end = -1): Promise<Job[]> {
    return this.getJobs('waiting', start, end, true);
  }

  /** Active jobs, the one active longest first. */
  getActive(start = 0, end = -1): Promise<Job[]> {
    return this.getJobs('active', start, end, true);
  }

  /** Delayed jobs, the one due first first. */
  getDelayed(start = 0, end = -1): Promise<Job[]> {
    return this.getJobs('delayed', start, end, true);
  }

  /** Prioritized jobs, the next to run first. */
  getPrioritized(start = 0, end = -1): Promise<Job[]> {
    return this.getJobs('prioritized', start, end, true);
  }

  /** Completed jobs, the last finished first. */
  getCompleted(start = 0, end = -1): Promise<Job[]> {
    return this.getJobs('completed', start, end, false);
  }

  /** Failed jobs, the last failed first. */
  getFailed(start = 0, end = -1): Promise<Job[]> {
    return this.getJobs('failed', start, end, false);
  }

  /** Always empty: glidemq has no parent/child jobs (BullMQ's flows). */
  getWaitingChildren(start = 0, end = -1): Promise<Job[]> {
    return this.getJobs('waiting-children', start, end, true);
  }

  async isPaused(): Promise<boolean> {
    return (await this.client.hget(this.keys.meta, 'paused')) === '1';
  }

  /** The job dedup id `id` points at while it still deduplicates adds, else null (src/engine/producing/dedup-queries.ts). */
  async getDeduplicationJobId(id: string): Promise<string | null> {
    await this.waitUntilReady();
    return deduplicationJobId(this.client, this.keys, id);
  }

  /** How long the queue stays rate limited, in ms of the server's clock (BullMQ's form: src/engine/administering/rate-limits.ts). */
  async getRateLimitTtl(maxJobs?: number): Promise<number> {
    await this.waitUntilReady();
    return rateLimitTtl(this.client, this.keys, maxJobs);
  }

  /** The limit setGlobalConcurrency stored (it outlives the worker that set it), or null for none, as BullMQ's. */
  async getGlobalConcurrency(): Promise<number | null> {
    await this.waitUntilReady();
    const n = await this.client.hget(this.keys.meta, 'globalConcurrency');
    return n === null ? null : Number(n);
  }

  /**
   * The live workers of this queue, from the registry each Worker keeps with an expiry on the
   * server's clock (src/engine/consuming/worker-registry.ts): a worker that died disappears on its own.
   * BullMQ's getWorkers lists CLIENT LIST entries; this lists what the workers registered.
   */
  async getWorkers(): Promise<WorkerInfo[]> {
    await this.waitUntilReady();
    return listWorkers(this.client, this.keys);
  }

  /**
   * The queue's latency: ms since the oldest waiting job became waiting, by the server's clock,
   * or null when no job waits (exact for plain and LIFO jobs, sampled for prioritized jobs and
   * groups: lua/workers.lua glidemq_oldestWaiting). Read-only.
   */
  async getOldestWaitingAge(): Promise<number | null> {
    await this.waitUntilReady();
    return oldestWaitingAge(this.client, this.keys);
  }

  /**
   * One step of a search: the jobs of `state` whose failure reason, name or data holds `grep`
   * (plain text, ASCII case ignored), among the next `count` entries of the state (default 100)
   * from `cursor`. Bounded on the server (lua/search.lua): call again with the cursor returned
   * until it is '0'; a step may find none. A job removed since it matched is left out.
   */
  async search(opts: SearchOptions): Promise<{ jobs: Job[]; cursor: string }> {
    await this.waitUntilReady();
    const step = await searchStep(this.client, this.keys, opts);
    const jobs = await Promise.all(step.ids.map((id) => this.getJob(id)));
    return { jobs: jobs.filter((j): j is Job => j !== undefined), cursor: step.cursor };
  }

  /**
   * Jobs completed and failed for good since the queue began, and the processing-time histogram
   * of its workers' attempts, kept on the server (src/engine/inspecting/lifetime-metrics.ts). Read-only.
   */
  async getLifetimeMetrics(): Promise<LifetimeMetrics> {
    await this.waitUntilReady();
    return readLifetimeMetrics(this.client, this.keys);
  }

  /**
   * The queue's metrics in the Prometheus text format, as BullMQ's (glidemq_ names: jobs per
   * state, completed and failed attempts and processing time of the last 24 hours, oldest waiting
   * age, live workers, and the lifetime counters and processing-time histogram kept on the server;
   * src/engine/inspecting/prometheus.ts). `globalVariables`: labels added to every sample.
   */
  async exportPrometheusMetrics(globalVariables?: Record<string, string>): Promise<string> {
    return renderPrometheus([await snapshotQueue(this)], globalVariables);
  }

  /** Whether the queue was ever used (a job added, a worker or a setting): it has its meta hash (as `glidemq queues` finds it). Writes nothing. */
  async exists(): Promise<boolean> {
    await this.waitUntilReady();
    return (await this.client.exists(this.keys.meta)) === 1;
  }

  /**
   * Completed/failed attempts and processing time per minute (the last hour by default; 24 h are
   * kept). The defaults (to = now, from = an hour before) are the server's clock, not this machine's.
   */
  async getMetrics(range: MetricsRange = {}): Promise<QueueMetrics> {
    const reply = (await this.call('glidemq_getMetrics', encodeRange(range))) as number[];
    return buildMetrics(reply);
  }

  async getScheduler(name: string): Promise<SchedulerInfo | undefined> {
    await this.waitUntilReady();
    const text = await this.client.hget(this.keys.schedulers, name);
    return text ? describeRecord(parseRecord(text)) : undefined;
  }

  /** Every scheduler of the queue, the one due first first. */
  async getSchedulers(): Promise<SchedulerInfo[]> {
    await this.waitUntilReady();
    const all = await this.client.hgetall(this.keys.schedulers);
    return Object.values(all)
      .map((text) => describeRecord(parseRecord(text)))
      .sort((a, b) => a.nextRun - b.nextRun || a.name.localeCompare(b.name));
  }

  async getJobScheduler(id: string): Promise<JobSchedulerJson | undefined> {
    const info = await this.getScheduler(id);
    return info && toJobSchedulerJson(info);
  }

  /** Schedulers `start`..`end` (inclusive; negative counts from the end) by next run, the latest first unless `asc`, as BullMQ orders them. */
  async getJobSchedulers(start = 0, end = -1, asc = false): Promise<JobSchedulerJson[]> {
    const all = await this.getSchedulers();
    if (!asc) all.reverse();
    return page(all, start, end).map(toJobSchedulerJson);
  }

  async getJobSchedulersCount(): Promise<number> {
    await this.waitUntilReady();
    return this.client.hlen(this.keys.schedulers);
  }
}
