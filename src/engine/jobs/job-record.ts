/**
 * What a job is: the fields of its stored hash as one read saw them (job-fields.ts decodes them),
 * with no connection. The Job (job.ts) extends it with what a job does: its claim, its queue,
 * and the calls that change it.
 */
import type { JobState } from '../inspecting/job-queries.js';
import { pairsToRecord } from '../shared/replies.js';
import { parseStacktrace } from '../shared/stacktrace.js';
import { num, parseJson, readData, readOptions, type JobOpts } from './job-fields.js';
import { parentOf } from './job-dependencies.js';

/** Every job without stacks shares this one (frozen) array: no allocation per job. */
const NO_STACKS: string[] = Object.freeze([]) as unknown as string[];

export class JobRecord<D = any, R = any> {
  id = '';
  name = '';
  data: D = {} as D;
  opts: JobOpts = {
    attempts: 1,
    delay: 0,
    priority: 0,
    lifo: false,
  };
  state: JobState = 'unknown';
  /**
   * The ms the job waits from when it was last scheduled until it is due, as BullMQ keeps it: live,
   * not the add option. A delayed add, a backoff retry, changeDelay and moveToDelayed store theirs;
   * promotion stores 0. As stored when this handle read the job (getJob shows it now).
   */
  delay = 0;
  timestamp = 0;
  attemptsMade = 0;
  stalledCount = 0;
  progress: unknown = 0;
  /** The processor's result once the job completed; null before (BullMQ starts it so too). */
  returnvalue: R | null = null;
  // A field the job does not have reads undefined, as in BullMQ: failedReason before a failure,
  // processedOn before a claim, finishedOn before the job finished, groupId outside a group.
  /** Why the last attempt failed (kept while a retry waits; cleared by job.retry()). */
  failedReason?: string;
  /** The error stacks of its failed attempts, oldest first, the newest 10 kept, each cut to 4 KiB (BullMQ's job.stacktrace; stacktrace.ts). */
  stacktrace: string[] = NO_STACKS;
  processedOn?: number;
  finishedOn?: number;
  /** The group the job runs in (job option `group.id`). */
  groupId?: string;
  /** A flow child's (first) parent: its id and its queue's key (`<prefix>:{<queue>}`), as BullMQ's job.parent. */
  parent?: { id: string; queueKey: string };
  /** A flow child's (first) parent's job key (`<prefix>:{<queue>}:job:<id>`), as BullMQ's job.parentKey. */
  parentKey?: string;


  /** @internal why a worker must not run this job (its hash is corrupt or not glidemq's), if so */
  unusable: string | undefined;
  /** @internal the raw hash fields */
  raw: Record<string, string> = {};
  /** On a job queue.add returned: whether that call created it (false: an existing job's id). */
  created?: boolean;
  /** On a job queue.add returned: 'blocked' when deduplication refused the add (the id is the
   * earlier job's), 'debounced' when the earlier delayed job took the new data and delay. */
  deduplicated?: 'blocked' | 'debounced';
  /** True once moveToDelayed parked this job: the worker then stores no outcome for the run. */
  moved = false;

  /** A dead letter's source queue (lua/dead-letters.lua): the queue the job failed for good in; else undefined. */
  get originalQueue(): string | undefined {
    return this.raw.originalQueue;
  }

  /** A dead letter's job id in its source queue; else undefined. */
  get originalJobId(): string | undefined {
    return this.raw.originalJobId;
  }

  /** The job's deduplication id (job option `deduplication.id` or `dedup.id`), else undefined. */
  get deduplicationId(): string | undefined {
    return this.opts.deduplication?.id ?? this.opts.dedup?.id;
  }

  /** Fills this record from its hash fields (a flat name/value list or a record); returns it. */
  protected assign(fields: string[] | Record<string, string>): this {
    let h: Record<string, string>;
    if (Array.isArray(fields)) {
      h = pairsToRecord<string>(fields);
    } else {
      h = fields;
    }
    const job = this;
    job.raw = h;
    job.id = h.id ?? '';
    job.name = h.name ?? '';
    const data = readData(h);
    job.data = data.value;
    job.unusable = data.unusable;
    const opts = readOptions(h);
    job.delay = opts.delay ?? 0;
    job.opts = opts;
    // the application's creation time (job option timestamp) when it gave one, else the server's
    job.timestamp = typeof opts.timestamp === 'number' ? opts.timestamp : num(h.ts, 0);
    job.attemptsMade = num(h.attemptsMade, 0);
    job.stalledCount = num(h.stalledCount, 0);
    job.progress = h.progress === undefined ? 0 : parseJson(h.progress, h.progress);
    job.returnvalue = h.returnvalue === undefined ? null : (parseJson(h.returnvalue, h.returnvalue) as R);
    job.failedReason = h.failedReason;
    if (h.stacktrace !== undefined) job.stacktrace = parseStacktrace(h.stacktrace);
    job.finishedOn = h.finishedOn ? Number(h.finishedOn) : undefined;
    job.groupId = h.grp;
    job.state = (h.state as JobState) ?? 'unknown';
    job.processedOn = h.processedOn ? Number(h.processedOn) : undefined;
    if (h.parents !== undefined) {
      job.parent = parentOf(h.parents);
      job.parentKey = h.parents.split(' ')[0];
    }
    return job;
  }

  toJSON() {
    return {
      id: this.id,
      name: this.name,
      state: this.state,
      data: this.data,
      opts: this.opts,
      delay: this.delay,
      timestamp: this.timestamp,
      attemptsMade: this.attemptsMade,
      stalledCount: this.stalledCount,
      progress: this.progress,
      returnvalue: this.returnvalue,
      failedReason: this.failedReason,
      processedOn: this.processedOn,
      finishedOn: this.finishedOn,
      // a dead letter says where it failed (lua/dead-letters.lua)
      ...(this.raw.originalQueue === undefined ? {} : { originalQueue: this.raw.originalQueue, originalJobId: this.raw.originalJobId }),
      // BullMQ's JobJson: a child's (first) parent, by its job key and as { id, queueKey }
      parentKey: this.parentKey,
      parent: this.parent && { ...this.parent },
    };
  }
}
