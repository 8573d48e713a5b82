/** The producer and inspector side of a queue: add jobs, pause/resume, counts, jobs by state. */
import { acquireClient, closeClient, settleTopology, type Acquired, type ConnectionInput, type Client } from './connection.js';
import { invalid } from './errors.js';
import { Job, type JobState } from './job.js';
import { addLog, getJobLogs, promoteJobs, retryJobs, updateProgress, type EditTarget, type RetryJobsOptions } from './job-edits.js';
import { QueueKeys, DEFAULT_PREFIX } from './keys.js';
import { clean, drain, obliterate, type CleanResult, type DrainResult, type ObliterateResult } from './cleanup.js';
import { callFunction, ensureLibrary } from './library.js';
import { buildRecord, describeRecord, parseRecord, type SchedulerInfo, type SchedulerTemplate, type SchedulerTiming } from './schedulers.js';
import { buildMetrics, encodeRange, type MetricsRange, type QueueMetrics } from './metrics.js';
import { DEFAULT_MAX_PAYLOAD, encodeBulk, encodeJob, type BulkJob, type JobOptions } from './options.js';
import { readGroupState, waitingGroupJobIds, type GroupState } from './groups.js';
import { pairsToRecord } from './replies.js';
import { SafeEmitter } from './safe-emitter.js';
import { Producer } from './producer.js';

export interface QueueOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** Largest accepted job data, in bytes of JSON (default 512 KiB). */
  maxPayloadBytes?: number;
}

export interface JobCounts {
  waiting: number;
  active: number;
  delayed: number;
  prioritized: number;
  completed: number;
  failed: number;
  paused: number;
  consumers: number;
  isPaused: boolean;
  listActive: number;
}

/** `start`..`end` of `ids`, inclusive, negative counting from the end (as ZRANGE and LRANGE take them). */
function page<T>(ids: T[], start: number, end: number): T[] {
  const from = start < 0 ? Math.max(0, ids.length + start) : start;
  const to = end < 0 ? ids.length + end : end;
  return to < from ? [] : ids.slice(from, to + 1);
}

/** Jobs per glidemq_add call in addBulk; calls are pipelined. */
const BULK_CHUNK = 200;

/** An event emitter as Worker is: a listener that throws arrives as `error` (see SafeEmitter). */
export class Queue extends SafeEmitter {
  readonly keys: QueueKeys;
  private readonly acquired: Acquired;
  private readonly maxPayload: number;
  /** Numbers every add call, so that a call re-sent after a lost reply adds nothing twice. */
  private readonly producer = new Producer();
  private ready: Promise<void> | undefined;

  constructor(
    readonly name: string,
    opts: QueueOptions = {},
  ) {
    super();
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
  async add(name: string, data: unknown, opts: JobOptions = {}): Promise<Job> {
    const group = encodeJob(name, data, opts);
    await this.waitUntilReady();
    // reply: the server's ts of the call, then id, created
    const r = (await this.addCall([group])) as (string | number)[];
    return this.describeAdded(String(r[1]), name, String(group[2]), opts, Number(r[0]), Number(r[2]));
  }

  /** One glidemq_add call for `groups` (encoded jobs), numbered for once-only adds. */
  private addCall(groups: (string | number)[][]): Promise<unknown> {
    const call = this.producer.next();
    const reply = callFunction(this.client, 'glidemq_add', this.keys.meta, [this.maxPayload, ...call.args, groups.length, ...groups.flat()]);
    return reply.finally(call.done);
  }

  /** Adds many jobs; validated all before any is written, then written in pipelined chunks. */
  async addBulk(jobs: BulkJob[]): Promise<Job[]> {
    const groups = encodeBulk(jobs, this.maxPayload);
    await this.waitUntilReady();
    const results: Job[] = [];
    const pending: Promise<unknown>[] = [];
    for (let start = 0; start < groups.length; start += BULK_CHUNK) {
      pending.push(this.addCall(groups.slice(start, start + BULK_CHUNK)));
    }
    const replies = (await Promise.all(pending)) as (string | number)[][];
    let i = 0;
    for (const reply of replies) {
      const ts = Number(reply[0]); // the server's time of that call
      for (let r = 1; r + 1 < reply.length; r += 2, i++) {
        const j = jobs[i];
        results.push(this.describeAdded(String(reply[r]), j.name, String(groups[i][2]), j.opts ?? {}, ts, Number(reply[r + 1])));
      }
    }
    return results;
  }

  /**
   * `code` is glidemq_add's: 1 created, 0 custom id existed, 2 deduplicated, 3 debounced.
   * `dataJson` is the JSON text that was sent (the job's data as stored); `ts` the server's time
   * of the call (the stored ts of a job it created).
   */
  private describeAdded(id: string, name: string, dataJson: string, opts: JobOptions, ts: number, code: number): Job {
    const created = code === 1;
    const job = Job.fromFields({ id, name, data: dataJson, ts: String(ts) });
    job.opts = { ...job.opts, attempts: opts.attempts ?? 1, delay: Number(opts.delay ?? 0) || 0, priority: opts.priority ?? 0, lifo: !!opts.lifo };
    job.state = created ? (opts.delay ? 'delayed' : opts.priority ? 'prioritized' : 'waiting') : 'unknown';
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

  async getJobCounts(): Promise<JobCounts> {
    const r = (await this.call('glidemq_getCounts', [])) as number[];
    const consumers = await this.consumerCount();
    const isPaused = r[6] === 1;
    return {
      waiting: r[0],
      active: r[1],
      delayed: r[2],
      prioritized: r[3],
      completed: r[4],
      failed: r[5],
      paused: isPaused ? r[0] + r[3] : 0,
      consumers,
      isPaused,
      listActive: r[7],
    };
  }

  /** Ids of the stream entries no worker has been given yet (after the group's last delivery). */
  private async undeliveredIds(): Promise<string[]> {
    let last = '0-0';
    try {
      const groups = (await this.client.xinfo('GROUPS', this.keys.stream)) as unknown[][];
      for (const g of groups) {
        const h = pairsToRecord(g);
        if (h.name === 'workers') last = String(h['last-delivered-id']);
      }
    } catch {
      return []; // no stream yet
    }
    const entries = (await this.client.xrange(this.keys.stream, `(${last}`, '+')) as [string, string[]][];
    return entries.map((e) => e[1][1]);
  }

  private async consumerCount(): Promise<number> {
    try {
      const groups = (await this.client.xinfo('GROUPS', this.keys.stream)) as unknown[][];
      for (const g of groups) {
        const h = pairsToRecord(g);
        if (h.name === 'workers') return Number(h.consumers);
      }
    } catch {
      /* no stream yet */
    }
    return 0;
  }

  /**
   * Jobs in a state, newest first for finished sets, in queue order otherwise; `start`..`end` is
   * the page (inclusive; negative counts from the end, as in ZRANGE). `waiting` lists exactly the
   * jobs getJobCounts counts as waiting, the ones drain removes: LIFO jobs, stream entries not yet
   * delivered to a worker, then the jobs waiting in groups (group by group, each in its order).
   */
  async getJobs(state: JobState, start = 0, end = 99): Promise<Job[]> {
    await this.waitUntilReady();
    let ids: string[];
    const k = this.keys;
    switch (state) {
      case 'completed':
        ids = await this.client.zrevrange(k.completed, start, end);
        break;
      case 'failed':
        ids = await this.client.zrevrange(k.failed, start, end);
        break;
      case 'delayed':
        ids = await this.client.zrange(k.scheduled, String(start), String(end));
        break;
      case 'prioritized':
        ids = await this.client.zrange(k.prioritized, String(start), String(end));
        break;
      case 'waiting': {
        const lifo = await this.client.lrange(k.lifo, 0, -1);
        const streamIds = await this.undeliveredIds();
        const groupIds = await waitingGroupJobIds(this.client, k);
        ids = page([...lifo, ...streamIds, ...groupIds], start, end);
        break;
      }
      case 'active': {
        const listIds = await this.client.smembers(k.listActiveIds);
        const pend = (await this.client.xpending(k.stream, 'workers', '-', '+', 10000).catch(() => [])) as [string][];
        const sids = new Set(pend.map((p) => p[0]));
        const entries = sids.size ? ((await this.client.xrange(k.stream, '-', '+')) as [string, string[]][]) : [];
        ids = [...entries.filter((e) => sids.has(e[0])).map((e) => e[1][1]), ...listIds];
        break;
      }
      default:
        throw invalid(`unknown job state "${state}"`);
    }
    const jobs = await Promise.all(ids.map((id) => this.getJob(id)));
    return jobs.filter((j): j is Job => !!j && (state !== 'waiting' || j.state === 'waiting'));
  }

  async pause(): Promise<boolean> {
    return (await this.call('glidemq_pause', [])) === 1;
  }

  async resume(): Promise<boolean> {
    return (await this.call('glidemq_resume', [])) === 1;
  }

  async isPaused(): Promise<boolean> {
    return (await this.client.hget(this.keys.meta, 'paused')) === '1';
  }

  async remove(id: string, opts: { force?: boolean } = {}): Promise<boolean> {
    return (await this.call('glidemq_removeJob', [id, opts.force ? '1' : '0'])) === 1;
  }

  async setGlobalConcurrency(n: number): Promise<void> {
    if (!Number.isInteger(n) || n < 0) throw invalid(`globalConcurrency must be a whole number >= 0, got ${n}`);
    await this.waitUntilReady();
    if (n === 0) await this.client.hdel(this.keys.meta, 'globalConcurrency');
    else await this.client.hset(this.keys.meta, 'globalConcurrency', String(n));
  }

  /**
   * Completed/failed attempts and processing time per minute (the last hour by default; 24 h are
   * kept). The defaults (to = now, from = an hour before) are the server's clock, not this machine's.
   */
  async getMetrics(range: MetricsRange = {}): Promise<QueueMetrics> {
    const reply = (await this.call('glidemq_getMetrics', encodeRange(range))) as number[];
    return buildMetrics(reply);
  }

  /** Removes jobs that wait (and delayed ones with `delayed`); active jobs are left to finish. */
  async drain(opts: { delayed?: boolean; dryRun?: boolean } = {}): Promise<DrainResult> {
    await this.waitUntilReady();
    return drain(this.client, this.keys, opts);
  }

  /** Removes completed or failed jobs that finished more than `graceMs` ago. */
  async clean(state: 'completed' | 'failed', graceMs: number, opts: { limit?: number; dryRun?: boolean } = {}): Promise<CleanResult> {
    await this.waitUntilReady();
    return clean(this.client, this.keys, state, graceMs, opts);
  }

  /** Deletes every key of the queue (refused while jobs are active, unless `force`). */
  async obliterate(opts: { force?: boolean; dryRun?: boolean } = {}): Promise<ObliterateResult> {
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

  /** The server's clock (TIME), in ms. */
  private async serverTime(): Promise<number> {
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

