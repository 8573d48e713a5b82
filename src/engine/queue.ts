/** The producer and inspector side of a queue: add jobs, pause/resume, counts, jobs by state. */
import { acquireClient, closeClient, settleTopology, type Acquired, type ConnectionInput, type Client } from './connection.js';
import { invalid } from './errors.js';
import { Job, type JobSource } from './job.js';
import * as queries from './job-queries.js';
import type { JobCounts, JobStateName, JobType } from './job-queries.js';
import { addLog, getJobLogs, promoteJobs, retryJobs, updateProgress, type EditTarget, type RetryJobsOptions } from './job-edits.js';
import { QueueKeys, DEFAULT_PREFIX } from './keys.js';
import { checkCleanArgs, clean, drain, obliterate, type CleanResult, type CleanState, type DrainResult, type ObliterateOptions, type ObliterateResult } from './cleanup.js';
import { callFunction, ensureLibrary } from './library.js';
import {
  buildRecord,
  describeRecord,
  parseRecord,
  timingFromRepeat,
  toJobSchedulerJson,
  type JobSchedulerJson,
  type JobSchedulerTemplate,
  type RepeatOptions,
  type SchedulerInfo,
  type SchedulerTemplate,
  type SchedulerTiming,
} from './schedulers.js';
import { buildMetrics, encodeRange, type MetricsRange, type QueueMetrics } from './metrics.js';
import { addedFields, DEFAULT_MAX_PAYLOAD, encodeJob, withDefaults, type BulkJob, type JobOptions } from './options.js';
import { addEncoded, encodeBulkJobs, type AddTarget, type BulkAdded } from './bulk-add.js';
import { readGroupState, type GroupState } from './groups.js';
import { deduplicationJobId, removeDeduplicationKey } from './dedup-queries.js';
import { rateLimitTtl, removeGlobalRateLimit, setGlobalRateLimit } from './rate-limits.js';
import { SafeEmitter } from './safe-emitter.js';
import { Producer } from './producer.js';
import { listWorkers, oldestWaitingAge, type WorkerInfo } from './worker-registry.js';
import { renderPrometheus, snapshotQueue } from './prometheus.js';

export interface QueueOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** Largest accepted job data, in bytes of JSON (default 512 KiB). */
  maxPayloadBytes?: number;
  /** Options every job added here gets unless it names them itself (merged shallowly, as BullMQ). */
  defaultJobOptions?: Omit<JobOptions, 'jobId'>;
}

/** getJobCounts() with no types (src/engine/job-queries.ts). */
export type { JobCounts } from './job-queries.js';

/** `start`..`end` of `ids`, inclusive, negative counting from the end (as ZRANGE and LRANGE take them). */
function page<T>(ids: T[], start: number, end: number): T[] {
  const from = start < 0 ? Math.max(0, ids.length + start) : start;
  const to = end < 0 ? ids.length + end : end;
  return to < from ? [] : ids.slice(from, to + 1);
}

/** The queue's defaultJobOptions, checked as a job's options are (a mistake shows at construction). */
function checkJobDefaults(d: QueueOptions['defaultJobOptions']): JobOptions | undefined {
  if (d === undefined) return undefined;
  if (typeof d !== 'object' || d === null) throw invalid('defaultJobOptions must be an object of job options');
  try {
    encodeJob('defaultJobOptions', {}, { ...d, jobId: undefined });
  } catch (err) {
    throw invalid(`defaultJobOptions: ${(err as Error).message}`);
  }
  return { ...d };
}

/** An event emitter as Worker is: a listener that throws arrives as `error` (see SafeEmitter). */
export class Queue extends SafeEmitter implements JobSource {
  readonly keys: QueueKeys;
  private readonly acquired: Acquired;
  private readonly maxPayload: number;
  private readonly jobDefaults: JobOptions | undefined;
  /** Numbers every add call, so that a call re-sent after a lost reply adds nothing twice. */
  private readonly producer = new Producer();
  private ready: Promise<void> | undefined;

  constructor(
    readonly name: string,
    opts: QueueOptions = {},
  ) {
    super();
    this.jobDefaults = checkJobDefaults(opts.defaultJobOptions); // before a connection is opened
    this.keys = new QueueKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    this.acquired = acquireClient(opts.connection);
    this.maxPayload = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD;
  }

  /** The connection; a Cluster client once waitUntilReady() found the server is a cluster node. */
  get client(): Client {
    return this.acquired.client;
  }

  /** Resolves once the library is on the server (also re-ensured on every reconnect). */
  waitUntilReady(): Promise<void> {
    if (!this.ready) {
      const ready = settleTopology(this.acquired).then((c) => ensureLibrary(c));
      // A failure (server down at the first call) is reported once; the next call tries again.
      ready.catch(() => {
        if (this.ready === ready) this.ready = undefined;
      });
      this.ready = ready;
    }
    return this.ready;
  }

  private async call(fn: string, args: (string | number)[]): Promise<unknown> {
    await this.waitUntilReady();
    return callFunction(this.client, fn, this.keys.meta, args);
  }

  /**
   * Adds a job. Its timestamp, delay and dedup window count from the server's clock, not this
   * machine's. Once per call: a call re-sent after its reply was lost adds nothing again.
   */
  async add(name: string, data: unknown, jobOpts: JobOptions = {}): Promise<Job> {
    const opts = withDefaults(this.jobDefaults, jobOpts);
    const group = encodeJob(name, data, opts);
    await this.waitUntilReady();
    // reply: the server's ts of the call, then id, created
    const r = (await this.addCall([group])) as (string | number)[];
    const job = this.describeAdded(String(r[1]), String(group[2]), group, Number(r[0]), Number(r[2]));
    if (job.created) this.emit('waiting', job); // BullMQ's Queue event, for each job an add created
    return job;
  }

  /** One glidemq_add call for `groups` (encoded jobs), numbered for once-only adds. */
  private addCall(groups: (string | number)[][]): Promise<unknown> {
    const call = this.producer.next();
    const reply = callFunction(this.client, 'glidemq_add', this.keys.meta, [this.maxPayload, ...call.args, groups.length, ...groups.flat()]);
    return reply.finally(call.done);
  }

  /**
   * Adds many jobs; validated all before any is written, then written in pipelined calls
   * (src/engine/bulk-add.ts). An invalid job throws with `index` (1-based) and `reason`.
   */
  async addBulk(bulk: BulkJob[]): Promise<Job[]> {
    const enc = encodeBulkJobs(bulk, this.jobDefaults, this.maxPayload);
    await this.waitUntilReady();
    const added = await addEncoded(this.addTarget(), enc);
    const jobs = bulk.map((_, i) => this.describeAdded(added.ids[i], enc.datas[i], enc.shapes[i], added.ts[i], added.codes[i]));
    for (const job of jobs) if (job.created) this.emit('waiting', job);
    return jobs;
  }

  /**
   * addBulk for callers that need only what happened to each job, not Job objects (the CLI's
   * `enqueue --ndjson`): the ids and glidemq_add's codes (1 created, 0 a job with that custom id
   * existed, 2 deduplicated, 3 debounced), in the order of `bulk`.
   */
  async addBulkIds(bulk: BulkJob[]): Promise<Pick<BulkAdded, 'ids' | 'codes'>> {
    const enc = encodeBulkJobs(bulk, this.jobDefaults, this.maxPayload);
    await this.waitUntilReady();
    const { ids, codes } = await addEncoded(this.addTarget(), enc);
    return { ids, codes };
  }

  private addTarget(): AddTarget {
    return { client: this.client, metaKey: this.keys.meta, producer: this.producer, maxPayload: this.maxPayload };
  }

  /**
   * The job an add describes, holding what was stored (the fields getJob reads back): `shape` is
   * its glidemq_add argument group (options.ts encodeJob), `dataJson` the JSON text of its data,
   * `code` glidemq_add's (1 created, 0 custom id existed, 2 deduplicated, 3 debounced) and `ts`
   * the server's time of the call (the stored ts of a job it created).
   */
  private describeAdded(id: string, dataJson: string, shape: (string | number)[], ts: number, code: number): Job {
    const created = code === 1;
    const job = Job.fromFields(addedFields(id, dataJson, shape, ts));
    job.state = created ? (job.opts.delay ? 'delayed' : job.opts.priority ? 'prioritized' : 'waiting') : 'unknown';
    job.created = created;
    job.queue = this;
    if (code === 2) job.deduplicated = 'blocked';
    if (code === 3) {
      job.deduplicated = 'debounced';
      job.state = 'delayed';
    }
    return job;
  }

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

  // ---- Changing jobs from the queue (BullMQ's Queue API; src/engine/job-edits.ts) ----

  /** The largest job data accepted, in bytes of JSON (job.updateData of a job fetched from here). */
  /** A copy of the options every job added here gets unless it names them (QueueOptions). */
  get defaultJobOptions(): JobOptions {
    return { ...this.jobDefaults };
  }

  get maxPayloadBytes(): number {
    return this.maxPayload;
  }

  /** The edits target of this queue: no claim (fence ''). */
  private async editTarget(): Promise<EditTarget> {
    await this.waitUntilReady();
    return { client: this.client, keys: this.keys, fence: '' };
  }

  /**
   * Appends a line to job `id`'s log, keeping the newest `keepLogs` lines (default: all). Returns
   * how many lines the log holds. Any job that exists, whatever its state (JobNotFoundError if none).
   */
  async addJobLog(id: string, line: string, keepLogs?: number): Promise<number> {
    return addLog(await this.editTarget(), id, line, keepLogs ?? 0);
  }

  /** Stores job `id`'s progress (any JSON value) and emits `progress` (id, progress) here. */
  async updateJobProgress(id: string, progress: unknown): Promise<void> {
    await updateProgress(await this.editTarget(), id, progress);
    this.emit('progress', id, progress);
  }

  /**
   * Puts failed (or, with `state: 'completed'`, completed) jobs back to waiting, `count` per server
   * call until none is left that finished at or before `timestamp` (default: the server's now when
   * the call starts). attemptsMade is kept, as BullMQ keeps it.
   */
  async retryJobs(opts: RetryJobsOptions = {}): Promise<void> {
    await retryJobs(await this.editTarget(), opts);
  }

  /** Moves every delayed job to waiting, due or not, `count` per server call. */
  async promoteJobs(opts: { count?: number } = {}): Promise<void> {
    await promoteJobs(await this.editTarget(), opts);
  }
  // ---- end of the changes from the queue ----

  // ---- Job states and counts, as BullMQ names them (src/engine/job-queries.ts) ----

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
  // ---- end of the job states and counts ----

  async pause(): Promise<boolean> {
    return (await this.call('glidemq_pause', [])) === 1;
  }

  async resume(): Promise<boolean> {
    return (await this.call('glidemq_resume', [])) === 1;
  }

  async isPaused(): Promise<boolean> {
    return (await this.client.hget(this.keys.meta, 'paused')) === '1';
  }

  /** Removes job `id`; emits 'removed' with the id when it did (BullMQ's Queue event). */
  async remove(id: string, opts: { force?: boolean } = {}): Promise<boolean> {
    const removed = (await this.call('glidemq_removeJob', [id, opts.force ? '1' : '0'])) === 1;
    if (removed) this.emit('removed', id);
    return removed;
  }

  /** The job dedup id `id` points at while it still deduplicates adds, else null (src/engine/dedup-queries.ts). */
  async getDeduplicationJobId(id: string): Promise<string | null> {
    await this.waitUntilReady();
    return deduplicationJobId(this.client, this.keys, id);
  }

  /** Forgets dedup id `id`, so the next add with it creates a job: 1 if it was there, else 0. */
  async removeDeduplicationKey(id: string): Promise<number> {
    await this.waitUntilReady();
    return removeDeduplicationKey(this.client, this.keys, id);
  }

  /** At most `max` jobs start in any `duration` ms across the queue's workers (src/engine/rate-limits.ts). */
  async setGlobalRateLimit(max: number, duration: number): Promise<void> {
    await this.waitUntilReady();
    await setGlobalRateLimit(this.client, this.keys, max, duration);
  }

  async removeGlobalRateLimit(): Promise<void> {
    await this.waitUntilReady();
    await removeGlobalRateLimit(this.client, this.keys);
  }

  /** How long the queue stays rate limited, in ms of the server's clock (BullMQ's form: src/engine/rate-limits.ts). */
  async getRateLimitTtl(maxJobs?: number): Promise<number> {
    await this.waitUntilReady();
    return rateLimitTtl(this.client, this.keys, maxJobs);
  }

  async setGlobalConcurrency(n: number): Promise<void> {
    if (!Number.isInteger(n) || n < 0) throw invalid(`globalConcurrency must be a whole number >= 0, got ${n}`);
    await this.waitUntilReady();
    if (n === 0) await this.client.hdel(this.keys.meta, 'globalConcurrency');
    else await this.client.hset(this.keys.meta, 'globalConcurrency', String(n));
  }

  /** The limit setGlobalConcurrency stored (it outlives the worker that set it), or null for none, as BullMQ's. */
  async getGlobalConcurrency(): Promise<number | null> {
    await this.waitUntilReady();
    const n = await this.client.hget(this.keys.meta, 'globalConcurrency');
    return n === null ? null : Number(n);
  }

  /**
   * The live workers of this queue, from the registry each Worker keeps with an expiry on the
   * server's clock (src/engine/worker-registry.ts): a worker that died disappears on its own.
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
   * The queue's metrics in the Prometheus text format, as BullMQ's (glidemq_ names: jobs per
   * state, completed and failed attempts and processing time of the last 24 hours, oldest waiting
   * age, live workers; src/engine/prometheus.ts). `globalVariables`: labels added to every sample.
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

  /**
   * Removes the jobs that wait (waiting, prioritized, in groups), and the delayed ones with
   * `delayed`: BullMQ's drain(true), or glidemq's { delayed, dryRun } (a dry run counts). Active
   * jobs are left to finish.
   */
  drain(delayed?: boolean): Promise<DrainResult>;
  drain(opts?: { delayed?: boolean; dryRun?: boolean }): Promise<DrainResult>;
  async drain(arg: boolean | { delayed?: boolean; dryRun?: boolean } = {}): Promise<DrainResult> {
    if (typeof arg !== 'boolean' && (typeof arg !== 'object' || arg === null)) {
      throw invalid(`drain takes true/false (also drain delayed jobs) or { delayed, dryRun }, got ${String(arg)}`);
    }
    await this.waitUntilReady();
    return drain(this.client, this.keys, typeof arg === 'boolean' ? { delayed: arg } : arg);
  }

  /**
   * BullMQ's form: removes at most `limit` jobs (0: no limit) of `type` (default completed) older
   * than `grace` ms and returns their ids. Finished jobs count from when they finished, the others
   * from when they last changed hands (BullMQ's rule), by the server's clock; 'paused' is the
   * waiting jobs of a paused queue (getJobCounts' paused). 'active' is refused (JobActiveError): glidemq
   * never removes a running job behind its worker. Emits 'cleaned' (ids, type) here.
   */
  clean(grace: number, limit?: number, type?: CleanState | 'active'): Promise<string[]>;
  /** glidemq's form (the CLI's): the same, with a dry run that lists without removing. */
  clean(state: CleanState, graceMs: number, opts?: { limit?: number; dryRun?: boolean }): Promise<CleanResult>;
  async clean(
    first: number | CleanState,
    second?: number,
    third?: CleanState | 'active' | { limit?: number; dryRun?: boolean },
  ): Promise<string[] | CleanResult> {
    if (typeof first === 'number') {
      const grace = Number.isFinite(first) && first >= 0 ? Math.floor(first) : first;
      const limit = second === undefined || second === 0 ? undefined : second; // BullMQ: 0 = no limit
      // BullMQ removes only active jobs whose lock expired; here such a job is stalled recovery's
      // to take back, and a running job is never removed: nothing to clean (apps that clean every
      // state in one Promise.all keep working)
      if (third === 'active') return [];
      const state = checkCleanArgs(third ?? 'completed', grace, limit);
      await this.waitUntilReady();
      const r = await clean(this.client, this.keys, state, grace, { limit });
      this.emit('cleaned', r.ids, state === 'waiting' ? 'wait' : state);
      return r.ids;
    }
    const opts = (third ?? {}) as { limit?: number; dryRun?: boolean };
    const state = checkCleanArgs(first, second, opts.limit);
    await this.waitUntilReady();
    const r = await clean(this.client, this.keys, state, second as number, opts);
    if (!r.dryRun) this.emit('cleaned', r.ids, state === 'waiting' ? 'wait' : state);
    return r;
  }

  /**
   * Deletes every key of the queue, `count` keys per round trip (BullMQ's { force, count }; a
   * dryRun counts them). Refused while jobs are active, unless `force`.
   */
  async obliterate(opts: ObliterateOptions = {}): Promise<ObliterateResult> {
    await this.waitUntilReady();
    return obliterate(this.client, this.keys, opts);
  }

  /**
   * Adds or updates a scheduler that adds a job from `template` at each slot of a cron pattern
   * (`{pattern, tz}`) or every `{every}` ms. Upserting an unchanged timing keeps its next run.
   */
  async upsertScheduler(name: string, timing: SchedulerTiming, template: SchedulerTemplate = {}): Promise<SchedulerInfo> {
    // a cron pattern's first run: its first slot after the server's time (the server stamps the rest)
    const rec = await buildRecord(name, timing, template, () => this.serverTime());
    const stored = await this.call('glidemq_upsertScheduler', [name, JSON.stringify(rec)]);
    return describeRecord(parseRecord(String(stored)));
  }

  /** The server's clock (TIME), in ms: the `now` of anything this queue compares with a stored time. */
  async serverTime(): Promise<number> {
    await this.waitUntilReady();
    const [s, us] = await this.client.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  async removeScheduler(name: string): Promise<boolean> {
    return (await this.call('glidemq_removeScheduler', [name])) === 1;
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

  // ---- BullMQ's job schedulers, over the schedulers above (src/engine/schedulers.ts) ----

  /**
   * Adds or updates scheduler `id` (upserting an unchanged timing keeps its next run). An `every`
   * scheduler adds its first job at once, as BullMQ's does. Repeat options glidemq has no
   * equivalent for (limit, endDate, offset) are refused by name (NotSupportedError). Returns the
   * scheduler: BullMQ returns its first job, but glidemq adds each job when its time comes.
   */
  async upsertJobScheduler(id: string, repeatOpts: RepeatOptions, template: JobSchedulerTemplate = {}): Promise<JobSchedulerJson> {
    if (typeof template !== 'object' || template === null) throw invalid(`upsertJobScheduler ${id}: the job template must be { name, data, opts }`);
    return toJobSchedulerJson(await this.upsertScheduler(id, timingFromRepeat(id, repeatOpts), template));
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

  async removeJobScheduler(id: string): Promise<boolean> {
    return this.removeScheduler(id);
  }
  // ---- end of BullMQ's job schedulers ----

  async close(): Promise<void> {
    await this.ready?.catch(() => undefined); // a Cluster client being set up is closed too
    // The replies the server keeps for this producer's calls are never asked for again once every
    // call settled: drop them now rather than when they expire (an hour on). Not awaited, and only
    // on a live connection: a close never waits for a server that is gone (the QUIT below goes
    // after the DEL, and closeClient gives up on it soon).
    if (this.producer.used && this.producer.settled && this.client.status === 'ready') {
      this.client.del(this.keys.producer(this.producer.id)).catch(() => undefined);
    }
    if (this.acquired.owned) await closeClient(this.client);
  }
}

