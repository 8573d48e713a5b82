/**
 * A glidemq Job as bull-board's handlers use a job (its QueueJob): the edits they call (retry,
 * promote, remove, changeDelay, changePriority, updateData) go to the Job, and toJSON gives the
 * BullMQ job JSON the board formats, with the fields glidemq's own toJSON leaves out (stacktrace,
 * attemptsStarted, stalledCounter) and a flow child's parent in BullMQ's `opts.parent` form.
 */
import type { JobRetryStatus, QueueJob, QueueJobJson } from '@bull-board/api/dist/types.js';
import type { Job, JobStateName } from '../../index.js';

/** bull-board accepts a string, a boolean, a number or an object as progress; anything else is shown as its JSON. */
function boardProgress(progress: unknown): string | boolean | number | object {
  if (progress === null || progress === undefined) return 0;
  if (Array.isArray(progress)) return JSON.stringify(progress);
  const kind = typeof progress;
  return kind === 'string' || kind === 'boolean' || kind === 'number' || kind === 'object' ? (progress as object) : String(progress);
}

export class BoardJob implements QueueJob {
  constructor(readonly job: Job) {}

  get id(): string {
    return this.job.id;
  }

  get name(): string {
    return this.job.name;
  }

  get progress(): string | boolean | number | object {
    return boardProgress(this.job.progress);
  }

  /** The job's options; a flow child's also say its parent as BullMQ's do ({ id, queue }), which bull-board follows to the flow's root. */
  get opts(): Job['opts'] & { parent?: { id: string; queue: string } } {
    const parent = this.job.parent;
    return parent ? { ...this.job.opts, parent: { id: parent.id, queue: parent.queueKey } } : this.job.opts;
  }

  /** The job's queue key (`<prefix>:{<queue>}`): what bull-board matches a flow parent's `queue` against. */
  get queueQualifiedName(): string | undefined {
    return this.job.queueQualifiedName;
  }

  get queueName(): string | undefined {
    return this.job.queueName;
  }

  getState(): Promise<JobStateName | 'unknown'> {
    return this.job.getState();
  }

  retry(state: JobRetryStatus = 'failed'): Promise<void> {
    return this.job.retry(state);
  }

  promote(): Promise<void> {
    return this.job.promote();
  }

  remove(): Promise<void> {
    return this.job.remove();
  }

  changeDelay(delay: number): Promise<void> {
    return this.job.changeDelay(delay);
  }

  changePriority(opts: { priority?: number; lifo?: boolean }): Promise<void> {
    return this.job.changePriority(opts);
  }

  async updateData(data: Record<string, unknown>): Promise<void> {
    await this.job.updateData(data);
  }

  getDependenciesCount(opts?: { processed?: boolean; unprocessed?: boolean; ignored?: boolean; failed?: boolean }) {
    return this.job.getDependenciesCount(opts);
  }

  getIgnoredChildrenFailures(): Promise<Record<string, string>> {
    return this.job.getIgnoredChildrenFailures();
  }

  toJSON(): QueueJobJson {
    const j = this.job;
    return {
      id: j.id,
      name: j.name,
      data: j.data,
      opts: this.opts,
      progress: this.progress,
      attemptsMade: j.attemptsMade,
      attemptsStarted: j.attemptsStarted,
      stalledCounter: j.stalledCount,
      delay: j.delay,
      timestamp: j.timestamp,
      processedOn: j.processedOn ?? null,
      finishedOn: j.finishedOn ?? null,
      failedReason: j.failedReason as string, // undefined until a failure, as BullMQ's
      stacktrace: [...j.stacktrace],
      returnvalue: j.returnvalue,
      ...(j.opts.priority ? { priority: j.opts.priority } : {}),
      ...(j.parentKey ? { parentKey: j.parentKey } : {}),
      ...(j.deduplicationId ? { deduplicationId: j.deduplicationId } : {}),
    };
  }
}
