/**
 * GlideMQAdapter: a glidemq Queue on bull-board (`@bull-board/api`'s BaseAdapter). bull-board's
 * BullMQ adapter refuses a glidemq queue, so this one speaks for it: counts and job lists by
 * state, job detail (data, options, stack, logs, progress), retry, promote, remove, clean, pause
 * and resume, add, metrics, workers, schedulers and flows, each through the Queue's own API (no
 * key is read here). It reports itself as type 'bullmq', the job model bull-board shows glidemq's
 * in (the same states and job JSON), which is also what turns the board's flow view on.
 */
import { BaseAdapter } from '@bull-board/api/dist/queueAdapters/base.js';
import type {
  AppJobScheduler,
  JobCleanStatus,
  JobCounts,
  JobSchedulerRepeatOptions,
  JobSchedulerUpdateResult,
  JobStatus,
  MetricsType,
  ObliterateOptions,
  QueueAdapterOptions,
  QueueDefaultJobOptions,
  QueueJob,
  QueueJobOptions,
  QueueMetrics,
  QueueRateLimit,
  QueueWorker,
  Status,
} from '@bull-board/api/dist/types.js';
import { FlowProducer, type Job, type JobNode, type JobOptions, type NodeOpts, type Queue } from '../../index.js';
import { BoardJob } from './board-job.js';

export type GlideMQAdapterOptions = Partial<QueueAdapterOptions & { allowCompletedRetries: boolean }>;

/** The job states bull-board lists for a glidemq queue, in the order it shows them. */
const JOB_STATUSES: JobStatus[] = ['active', 'waiting', 'waiting-children', 'prioritized', 'completed', 'failed', 'delayed', 'paused'];

/** A flow node's jobs as bull-board reads them (its toJSON, state and dependencies). */
interface BoardFlowNode {
  job: BoardJob;
  children?: BoardFlowNode[];
}

function boardNode(node: JobNode): BoardFlowNode {
  return { job: new BoardJob(node.job), ...(node.children ? { children: node.children.map(boardNode) } : {}) };
}

export class GlideMQAdapter extends BaseAdapter {
  private flowProducer: FlowProducer | undefined;

  constructor(
    readonly queue: Queue,
    options: GlideMQAdapterOptions = {},
  ) {
    super('bullmq', options);
  }

  getName(): string {
    return `${this.prefix}${this.queue.name}`;
  }

  /** The queue's name as glidemq knows it (bull-board's flow view reads it). */
  getQueueName(): string {
    return this.queue.name;
  }

  /** The queue's key, `<prefix>:{<queue>}`: what a flow child's parent names its queue by. */
  getQueueQualifiedName(): string {
    return this.queue.keys.base;
  }

  async getRedisInfo(): Promise<string | null> {
    await this.queue.waitUntilReady();
    return this.queue.client.info();
  }

  async getJob(id: string): Promise<QueueJob | undefined> {
    const job = await this.queue.getJob(id);
    return job && new BoardJob(job);
  }

  /**
   * The jobs of `statuses`, each status's page `start`..`end`, newest first (as BullMQ's). A
   * paused queue's waiting jobs are listed under 'paused' only, as getJobCounts counts them.
   */
  async getJobs(statuses: JobStatus[], start?: number, end?: number): Promise<QueueJob[]> {
    let types: JobStatus[] = statuses;
    if (types.includes('waiting') && (await this.queue.isPaused())) types = types.filter((t) => t !== 'waiting');
    if (types.length === 0) return [];
    const jobs = await this.queue.getJobs(types, start, end);
    return jobs.map((job: Job) => new BoardJob(job));
  }

  /** Every state's count (glidemq's extra fields, such as consumers, left out). */
  async getJobCounts(): Promise<JobCounts> {
    const all = (await this.queue.getJobCounts()) as unknown as Record<string, number>;
    const counts: Record<string, number> = {};
    for (const status of JOB_STATUSES) counts[status] = all[status] ?? 0;
    return counts as JobCounts;
  }

  async getJobLogs(id: string): Promise<string[]> {
    return (await this.queue.getJobLogs(id)).logs;
  }

  /**
   * BullMQ's metrics shape from glidemq's per-minute metrics (the last hour): `data` the count of
   * each minute, the newest first, `count` the total.
   */
  async getMetrics(type: MetricsType, start = 0, end = -1): Promise<QueueMetrics> {
    const m = await this.queue.getMetrics();
    const perMinute = m.minutes.map((minute) => minute[type]).reverse();
    const data = perMinute.slice(start, end < 0 ? perMinute.length + end + 1 : end + 1);
    const count = m[type];
    return { meta: { count, prevTS: m.to, prevCount: 0 }, data, count };
  }

  isPaused(): Promise<boolean> {
    return this.queue.isPaused();
  }

  async pause(): Promise<void> {
    await this.queue.pause();
  }

  async resume(): Promise<void> {
    await this.queue.resume();
  }

  /** Removes the jobs of `status` finished (or last moved) more than `graceTimeMs` ago; running jobs are never removed. */
  async clean(status: JobCleanStatus, graceTimeMs: number): Promise<void> {
    await this.queue.clean(graceTimeMs, 0, status);
  }

  async addJob(name: string, data: unknown, options: QueueJobOptions): Promise<QueueJob> {
    return new BoardJob(await this.queue.add(name, data ?? {}, (options ?? {}) as JobOptions));
  }

  async empty(): Promise<void> {
    await this.queue.drain();
  }

  async obliterate(opts: ObliterateOptions = {}): Promise<void> {
    await this.queue.obliterate({ force: !!opts.force });
  }

  promoteAll(): Promise<void> {
    return this.queue.promoteJobs();
  }

  getStatuses(): Status[] {
    return ['latest', ...JOB_STATUSES];
  }

  getJobStatuses(): JobStatus[] {
    return [...JOB_STATUSES];
  }

  /** The live workers (glidemq's registry, not CLIENT LIST): age from their own registration, by the server's clock. */
  override async getWorkers(): Promise<QueueWorker[] | null> {
    const workers = await this.queue.getWorkers();
    return workers.map((w) => ({
      id: w.id,
      name: w.id,
      addr: `${w.host} pid ${w.pid}`,
      age: Math.max(0, Math.round((w.lastSeen - w.startedAt) / 1000)),
    }));
  }

  getGlobalConcurrency(): Promise<number | null> {
    return this.queue.getGlobalConcurrency();
  }

  async setGlobalConcurrency(concurrency: number): Promise<void> {
    await this.queue.setGlobalConcurrency(Math.max(0, concurrency));
  }

  override get supportsGlobalRateLimit(): boolean {
    return true;
  }

  override async setConfiguredRateLimit({ max, duration }: QueueRateLimit): Promise<void> {
    await this.queue.setGlobalRateLimit(max, duration);
  }

  override async removeConfiguredRateLimit(): Promise<void> {
    await this.queue.removeGlobalRateLimit();
  }

  override async getActiveRateLimitTtl(): Promise<number> {
    return Math.max(0, await this.queue.getRateLimitTtl());
  }

  override getQueueDefaultJobOptions(): QueueDefaultJobOptions {
    return this.queue.defaultJobOptions as QueueDefaultJobOptions;
  }

  async getJobSchedulers(): Promise<Omit<AppJobScheduler, 'queueName'>[]> {
    const schedulers = await this.queue.getJobSchedulers(0, -1);
    return schedulers.map((s) => ({
      id: s.key,
      name: s.name,
      ...(s.pattern !== undefined ? { pattern: s.pattern } : {}),
      ...(s.every !== undefined ? { every: s.every } : {}),
      ...(s.tz !== undefined ? { tz: s.tz } : {}),
      ...(s.startDate !== undefined ? { startDate: s.startDate } : {}),
      ...(s.next !== undefined ? { next: s.next } : {}),
      ...(s.template ? { template: { data: s.template.data, opts: s.template.opts } } : {}),
    }));
  }

  getJobSchedulersCount(): Promise<number> {
    return this.queue.getJobSchedulersCount();
  }

  removeJobScheduler(id: string): Promise<boolean> {
    return this.queue.removeJobScheduler(id);
  }

  /** Not offered (supportsJobSchedulerUpdate is false): `glidemq schedulers` changes a schedule. */
  async updateJobScheduler(_id: string, _repeat: JobSchedulerRepeatOptions): Promise<JobSchedulerUpdateResult> {
    return 'not-found';
  }

  override get supportsJobSchedulerRun(): boolean {
    return true;
  }

  /** Adds one job from the scheduler's template now; the schedule keeps its next run. */
  async runJobSchedulerNow(id: string): Promise<QueueJob | 'not-found'> {
    const s = await this.queue.getJobScheduler(id);
    if (!s) return 'not-found';
    return new BoardJob(await this.queue.add(s.name, s.template?.data ?? {}, s.template?.opts ?? {}));
  }

  /** What bull-board's flow view reads a flow with: glidemq's FlowProducer on the queue's connection, its jobs as the board reads them. */
  async getFlowProducer(): Promise<{ getFlow(opts: NodeOpts): Promise<BoardFlowNode | undefined> }> {
    await this.queue.waitUntilReady();
    this.flowProducer ??= new FlowProducer({ connection: this.queue.client, prefix: this.queue.keys.prefix });
    const producer = this.flowProducer;
    return {
      getFlow: async (opts) => {
        const node = await producer.getFlow(opts);
        return node && boardNode(node);
      },
    };
  }

  /** Closes what the adapter opened (its flow reader); the Queue is the caller's. */
  async close(): Promise<void> {
    await this.flowProducer?.close();
    this.flowProducer = undefined;
  }
}
