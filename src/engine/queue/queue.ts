/**
 * A queue as producers and operators use it: add jobs, change them, pause and resume, remove,
 * clean, drain and obliterate, rate limits and schedulers. What it reads comes from QueueGetters
 * (queue-getters.ts), the connection from QueueBase (queue-base.ts), as BullMQ's Queue is built.
 */
import type { ConnectionInput } from '../connecting/connection.js';
import { ConfirmTimeoutError, invalid } from '../shared/errors.js';
import { Job, type JobSource } from '../jobs/job.js';
import { addLog, promoteJobs, retryJobs, updateProgress, type EditTarget, type RetryJobsOptions } from '../jobs/job-edits.js';
import { checkCleanArgs, clean, drain, obliterate, type CleanResult, type CleanState, type DrainResult, type ObliterateOptions, type ObliterateResult } from '../administering/cleanup.js';
import { callFunction } from '../connecting/library.js';
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
} from '../scheduling/schedulers.js';
import { addedFields, DEFAULT_MAX_PAYLOAD, encodeJob, withDefaults, type BulkJob, type JobOptions } from '../producing/options.js';
import { addEncoded, encodeBulkJobs, type AddTarget, type BulkAdded } from '../producing/bulk-add.js';
import { removeDeduplicationKey } from '../producing/dedup-queries.js';
import { removeJob } from '../jobs/job-removal.js';
import { removeGlobalRateLimit, setGlobalRateLimit } from '../administering/rate-limits.js';
import { revokeJob, type RevokeResult } from '../administering/revoke.js';
import { QueueGetters } from './queue-getters.js';
import { requestWorker } from '../consuming/worker-registry.js';
import { Producer } from '../producing/producer.js';
import { childNode, parentJobKey } from '../flows/flow-nodes.js';
import { addedJob, addNodes } from '../flows/flow-producer.js';
import { checkDeadLetterQueue, storeDeadLetterQueue, type DeadLetterQueueOptions } from '../administering/dead-letters.js';
import { readDeadLetterJobs } from './dead-letter-reads.js';
import { checkConfirm, confirmedCall, pickConfirm, type Confirm, type ConfirmOptions } from '../producing/confirm.js';
import { Telemetry, type TelemetryOption } from '../shared/telemetry.js';
import { AddTracing } from './add-tracing.js';

export interface QueueOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** Largest accepted job data, in bytes of JSON (default 512 KiB). */
  maxPayloadBytes?: number;
  /** Options every job added here gets unless it names them itself (merged shallowly, as BullMQ). */
  defaultJobOptions?: Omit<JobOptions, 'jobId'>;
  /**
   * glide-mq's dead-letter queue: a job that fails for good is copied there (README "Dead letters").
   * Stored in the queue's meta before this queue's first call, so every worker's failures follow it.
   */
  deadLetterQueue?: DeadLetterQueueOptions;
  /**
   * Confirmed writes for every add (README "Confirmed writes"): an add resolves only once WAITAOF /
   * WAIT confirm it, else rejects with ConfirmTimeoutError. An add's own `confirm` overrides it.
   */
  confirm?: ConfirmOptions;
  /**
   * OpenTelemetry tracing of adds (README "Tracing"): true (the global tracer provider) or
   * { tracer }; each add is a producer span whose context the job stores for the worker's span.
   */
  telemetry?: TelemetryOption;
}

/** getJobCounts() with no types (src/engine/inspecting/job-queries.ts). */
export type { JobCounts } from '../inspecting/job-queries.js';

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

/** A queue (BullMQ's Queue): events `waiting`, `removed`, `progress`, `cleaned`, and `error` for a listener that throws. */
export class Queue extends QueueGetters implements JobSource {
  private readonly maxPayload: number;
  private readonly jobDefaults: JobOptions | undefined;
  /** Numbers every add call, so that a call re-sent after a lost reply adds nothing twice. */
  private readonly producer = new Producer();
  /** The dead-letter queue this queue was made with, and its store in meta once started. */
  private readonly deadLetterName: string | undefined;
  private deadLetterStored: Promise<void> | undefined;
  /** The confirm option checked (undefined: adds are not confirmed unless a call asks). */
  readonly confirm: Confirm | undefined;
  /** With the telemetry option: the adds' producer spans (@opentelemetry/api is loaded at the first add). */
  private readonly tracing: AddTracing | undefined;

  constructor(name: string, opts: QueueOptions = {}) {
    const jobDefaults = checkJobDefaults(opts.defaultJobOptions); // before a connection is opened
    const confirm = checkConfirm(opts.confirm);
    const deadLetterName = checkDeadLetterQueue(opts.deadLetterQueue, name);
    const telemetry = Telemetry.of(opts.telemetry, `queue ${name}`);
    super(name, opts);
    this.tracing = telemetry && new AddTracing(telemetry, name, async (parent) => {
      await this.waitUntilReady();
      return this.client.hget(parentJobKey(parent, this.keys.prefix), 'opts');
    });
    this.deadLetterName = deadLetterName;
    this.confirm = confirm;
    this.jobDefaults = jobDefaults;
    this.maxPayload = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD;
  }

  /**
   * Adds a job. Its timestamp, delay and dedup window count from the server's clock, not this
   * machine's. Once per call: a call re-sent after its reply was lost adds nothing again.
   */
  add(name: string, data: unknown, jobOpts: JobOptions = {}): Promise<Job> {
    // (no await here: an add without tracing makes no promise more than before)
    if (this.tracing) return this.tracing.add(name, withDefaults(this.jobDefaults, jobOpts), (telemetry) => this.addJob(name, data, { ...jobOpts, telemetry }));
    return this.addJob(name, data, jobOpts);
  }

  /** add() without tracing (BullMQ's addJob). */
  private async addJob(name: string, data: unknown, jobOpts: JobOptions): Promise<Job> {
    const opts = withDefaults(this.jobDefaults, jobOpts);
    if (opts.parent !== undefined) return this.addChild(name, data, opts);
    const group = encodeJob(name, data, opts);
    const confirm = pickConfirm(opts.confirm, this.confirm);
    await this.waitUntilReady();
    // reply: the server's ts of the call, then id, created
    const r = (await this.addCall([group], confirm, `add of a job "${name}"`)) as (string | number)[];
    const job = this.describeAdded(String(r[1]), String(group[2]), group, Number(r[0]), Number(r[2]));
    if (job.created) this.emit('waiting', job); // BullMQ's Queue event, for each job an add created
    return job;
  }

  /**
   * A job with BullMQ's `parent` option: stored with its place in the parent's dependencies in one
   * glidemq_addFlow call (lua/flow.lua), its id made here unless it has a jobId (flows/flow-nodes.ts).
   */
  private async addChild(name: string, data: unknown, opts: JobOptions): Promise<Job> {
    const node = childNode(this.name, this.keys.prefix, name, data, opts);
    const confirm = pickConfirm(opts.confirm, this.confirm);
    await this.waitUntilReady();
    const { ts, created, shapes } = await addNodes({ client: this.client, producer: this.producer, maxPayload: this.maxPayload, confirm }, [node]);
    const job = addedJob(node, shapes[0], ts, () => this);
    job.created = created;
    if (created) this.emit('waiting', job);
    return job;
  }

  /**
   * One glidemq_add call for `groups` (encoded jobs), numbered for once-only adds, and confirmed as
   * `confirm` asks. A call whose confirmation timed out stays open (its reply kept on the server)
   * so that the error's retry() re-sends the very same call and adds nothing twice.
   */
  private addCall(groups: (string | number)[][], confirm?: Confirm, what = 'add'): Promise<unknown> {
    const call = this.producer.next();
    const args = [this.maxPayload, ...call.args, groups.length, ...groups.flat()];
    const send = (): Promise<unknown> =>
      confirmedCall(this.client, 'glidemq_add', this.keys.meta, args, confirm, () => ({ what: `${what} to queue ${this.name}`, retry: send }))
        .then((r) => {
          call.done();
          return r;
        }, (err: unknown) => {
          if (!(err instanceof ConfirmTimeoutError)) call.done();
          throw err;
        });
    return send();
  }

  /**
   * Adds many jobs; validated all before any is written, then written in pipelined calls
   * (src/engine/producing/bulk-add.ts). An invalid job throws with `index` (1-based) and `reason`.
   */
  addBulk(bulk: BulkJob[], opts: { confirm?: ConfirmOptions | false } = {}): Promise<Job[]> {
    if (this.tracing) return this.tracing.bulk(bulkLength(bulk), (telemetry) => this.addBulkJobs(bulk, opts, telemetry), (jobs) => jobs.map((j) => j.id));
    return this.addBulkJobs(bulk, opts);
  }

  /** The defaults of a bulk's jobs: the queue's, with the trace context of a traced bulk. */
  private bulkDefaults(telemetry: JobOptions['telemetry']): JobOptions | undefined {
    return telemetry ? { ...this.jobDefaults, telemetry } : this.jobDefaults;
  }

  private async addBulkJobs(bulk: BulkJob[], opts: { confirm?: ConfirmOptions | false }, telemetry?: JobOptions['telemetry']): Promise<Job[]> {
    // children of existing parents go one by one, each with its place among its parent's dependencies
    if (Array.isArray(bulk) && bulk.some((b) => b?.opts?.parent !== undefined || this.jobDefaults?.parent !== undefined)) {
      const jobs: Job[] = [];
      for (const b of bulk) jobs.push(await this.add(b.name, b.data, opts.confirm === undefined ? b.opts : { ...b.opts, confirm: opts.confirm }));
      return jobs;
    }
    const enc = encodeBulkJobs(bulk, this.bulkDefaults(telemetry), this.maxPayload);
    await this.waitUntilReady();
    const added = await addEncoded(this.addTarget(pickConfirm(opts.confirm, this.confirm)), enc);
    const jobs = bulk.map((_, i) => this.describeAdded(added.ids[i], enc.datas[i], enc.shapes[i], added.ts[i], added.codes[i]));
    for (const job of jobs) if (job.created) this.emit('waiting', job);
    return jobs;
  }

  /**
   * addBulk for callers that need only what happened to each job, not Job objects (the CLI's
   * `enqueue --ndjson`): the ids and glidemq_add's codes (1 created, 0 a job with that custom id
   * existed, 2 deduplicated, 3 debounced), in the order of `bulk`.
   */
  addBulkIds(bulk: BulkJob[], opts: { confirm?: ConfirmOptions | false } = {}): Promise<Pick<BulkAdded, 'ids' | 'codes'>> {
    if (this.tracing) return this.tracing.bulk(bulkLength(bulk), (telemetry) => this.addBulkIdsOf(bulk, opts, telemetry), (r) => r.ids);
    return this.addBulkIdsOf(bulk, opts);
  }

  private async addBulkIdsOf(bulk: BulkJob[], opts: { confirm?: ConfirmOptions | false }, telemetry?: JobOptions['telemetry']): Promise<Pick<BulkAdded, 'ids' | 'codes'>> {
    const enc = encodeBulkJobs(bulk, this.bulkDefaults(telemetry), this.maxPayload);
    const confirm = pickConfirm(opts.confirm, this.confirm);
    await this.waitUntilReady();
    const { ids, codes } = await addEncoded(this.addTarget(confirm), enc);
    return { ids, codes };
  }

  private addTarget(confirm?: Confirm): AddTarget {
    return { client: this.client, metaKey: this.keys.meta, producer: this.producer, maxPayload: this.maxPayload, confirm, queueName: this.name };
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

  async pause(): Promise<boolean> {
    return (await this.call('glidemq_pause', [])) === 1;
  }

  async resume(): Promise<boolean> {
    return (await this.call('glidemq_resume', [])) === 1;
  }

  /**
   * Removes job `id`; emits 'removed' with the id when it did (BullMQ's Queue event). A parent goes
   * with its unfinished subtree in every queue, or with `removeChildren: false` alone (its
   * children stay, no longer naming it); JobActiveError while one of them runs, unless `force`.
   */
  async remove(id: string, opts: { force?: boolean; removeChildren?: boolean } = {}): Promise<boolean> {
    await this.waitUntilReady();
    const removed = await removeJob(this.client, this.keys, id, opts);
    if (removed) this.emit('removed', id);
    return removed;
  }

  /**
   * Stops job `id` from any process (glide-mq's revoke; src/engine/administering/revoke.ts): a job
   * that has not started never runs and fails as 'revoked' (answers 'revoked'); a running one's
   * AbortSignal aborts with reason 'revoked' in the worker that runs it within one lock renewal
   * ('flagged'); a finished one is left ('finished'); no such job: 'not_found'. `dryRun` answers
   * what it would do and changes nothing.
   */
  async revoke(id: string, opts: { dryRun?: boolean } = {}): Promise<RevokeResult> {
    await this.waitUntilReady();
    return revokeJob(this.client, this.keys, id, !!opts.dryRun);
  }

  /** Forgets dedup id `id`, so the next add with it creates a job: 1 if it was there, else 0. */
  async removeDeduplicationKey(id: string): Promise<number> {
    await this.waitUntilReady();
    return removeDeduplicationKey(this.client, this.keys, id);
  }

  /** At most `max` jobs start in any `duration` ms across the queue's workers (src/engine/administering/rate-limits.ts). */
  async setGlobalRateLimit(max: number, duration: number): Promise<void> {
    await this.waitUntilReady();
    await setGlobalRateLimit(this.client, this.keys, max, duration);
  }

  async removeGlobalRateLimit(): Promise<void> {
    await this.waitUntilReady();
    await removeGlobalRateLimit(this.client, this.keys);
  }

  /**
   * Asks live worker `id` of this queue (its consumer name: getWorkers() lists them) to take no new
   * jobs; its running jobs go on. It obeys at its next registry refresh (within lockDuration / 2
   * and registryTtl / 3) and emits `quietRequested`. False when no live worker has that id.
   */
  async quietWorker(id: string): Promise<boolean> {
    await this.waitUntilReady();
    return requestWorker(this.client, this.keys, id, 'quiet');
  }

  /**
   * Asks live worker `id` of this queue to finish its running jobs and close (its graceful
   * close()), at its next registry refresh; it emits `stopRequested`. False when no live worker
   * has that id.
   */
  async stopWorker(id: string): Promise<boolean> {
    await this.waitUntilReady();
    return requestWorker(this.client, this.keys, id, 'stop');
  }

  async setGlobalConcurrency(n: number): Promise<void> {
    if (!Number.isInteger(n) || n < 0) throw invalid(`globalConcurrency must be a whole number >= 0, got ${n}`);
    await this.waitUntilReady();
    if (n === 0) await this.client.hdel(this.keys.meta, 'globalConcurrency');
    else await this.client.hset(this.keys.meta, 'globalConcurrency', String(n));
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

  async removeScheduler(name: string): Promise<boolean> {
    return (await this.call('glidemq_removeScheduler', [name])) === 1;
  }

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

  async removeJobScheduler(id: string): Promise<boolean> {
    return this.removeScheduler(id);
  }

  /** Resolves once the library is on the server and the dead-letter queue this queue was made with is stored. */
  override async waitUntilReady(): Promise<void> {
    await super.waitUntilReady();
    if (this.deadLetterName === undefined) return;
    this.deadLetterStored ??= storeDeadLetterQueue(this.client, this.keys, this.deadLetterName).catch((err) => {
      this.deadLetterStored = undefined; // tried again by the next call
      throw err;
    });
    await this.deadLetterStored;
  }

  /**
   * Names the queue's dead-letter queue (null: none), for every client from now on (README "Dead
   * letters"). Resolves to the name it replaced, or null.
   */
  async setDeadLetterQueue(name: string | null): Promise<string | null> {
    const next = name === null ? '' : checkDeadLetterQueue({ name }, this.name)!;
    await super.waitUntilReady();
    const old = String(await callFunction(this.client, 'glidemq_setDeadLetterQueue', this.keys.meta, [next]));
    return old === '' ? null : old;
  }

  /**
   * The dead letters of this queue (glide-mq's getDeadLetterJobs): jobs in its dead-letter queue's
   * failed set, newest first, page `start`..`end` (inclusive); none when the queue has no dead-letter
   * queue. Each carries originalQueue and originalJobId. On the dead-letter queue itself, use
   * getFailed() or getJobs('failed').
   */
  async getDeadLetterJobs(start = 0, end = -1): Promise<Job[]> {
    await this.waitUntilReady();
    return readDeadLetterJobs(this.client, this.keys, this.deadLetterName, start, end);
  }

  async close(): Promise<void> {
    await this.startupSettled(); // a Cluster client being set up is closed too
    // The replies the server keeps for this producer's calls are never asked for again once every
    // call settled: drop them now rather than when they expire (an hour on). Not awaited, and only
    // on a live connection: a close never waits for a server that is gone (the QUIT below goes
    // after the DEL, and closeClient gives up on it soon).
    if (this.producer.used && this.producer.settled && this.client.status === 'ready') {
      this.client.del(this.keys.producer(this.producer.id)).catch(() => undefined);
    }
    await this.closeConnection();
  }
}

/** How many jobs a bulk holds (0 for what is not an array: the add itself refuses it). */
function bulkLength(bulk: BulkJob[]): number {
  return Array.isArray(bulk) ? bulk.length : 0;
}
