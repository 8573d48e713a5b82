/**
 * Jobs as an operator asks for them (the CLI's `jobs`, `retry`, `promote` and `export`): one
 * state's jobs filtered by name and by how recent they are, read page by page through getJobs so a
 * large queue is never loaded whole; retry and promote of chosen jobs with an answer per id; and
 * each job as the {name, data, opts} envelope `enqueue --ndjson --envelope` reads back.
 *
 * "Recent" (--since) means: added within the span for waiting, active, delayed, prioritized and
 * paused jobs; finished within it for completed and failed jobs (what "failed in the last hour"
 * means to an operator). Every time compared is the server's: its TIME is the `now` of a listing,
 * and a job's added and finished times are the server's too.
 */
import { GlideMQError, invalid } from '../shared/errors.js';
import type { Job } from '../jobs/job.js';
import { promoteJob, retryJob, type EditTarget } from '../jobs/job-edits.js';
import type { JobType } from '../inspecting/job-queries.js';
import type { JobOptions } from '../producing/options.js';
import type { Queue } from '../queue/queue.js';

/** The states a listing takes ('paused': the waiting jobs of a paused queue; 'waiting-children': flow parents waiting for their dependencies). */
export const LISTABLE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused', 'waiting-children'] as const;
export type ListableState = (typeof LISTABLE_STATES)[number];

export interface JobFilter {
  state: ListableState;
  /** Only jobs of this name. */
  name?: string;
  /** Only jobs added (completed and failed: finished) within this many ms of `now`. */
  sinceMs?: number;
}

/** Jobs read per getJobs call while filtering. */
const PAGE = 200;
/** Ids looked at or moved at once (one pipelined round trip each). */
const CHUNK = 100;

export function checkState(state: unknown, what = '--state'): ListableState {
  if (typeof state !== 'string' || !(LISTABLE_STATES as readonly string[]).includes(state)) {
    throw invalid(`${what} must be one of ${LISTABLE_STATES.join(', ')}, got "${String(state)}"`);
  }
  return state as ListableState;
}


/** The time --since compares: when a finished job finished, when any other job was added. */
export function recentTime(job: Job, state: ListableState): number {
  return state === 'completed' || state === 'failed' ? (job.finishedOn ?? 0) : job.timestamp;
}

function finished(state: ListableState): boolean {
  return state === 'completed' || state === 'failed';
}

/**
 * The jobs of `filter.state` that pass its name and --since filters, newest first (the last
 * added, activated, finished, or due last first; `asc`: the other way round), read `PAGE` at a
 * time. Newest first over a finished set stops at the first job that finished before the window:
 * the set is ordered by finish time. A job listed twice because the queue moved under the pages
 * is yielded once.
 */
export async function* matchingJobs(q: Queue, filter: JobFilter, now: number, asc = false): AsyncGenerator<Job> {
  const cutoff = filter.sinceMs === undefined ? undefined : now - filter.sinceMs;
  const seen = new Set<string>();
  for (let start = 0; ; start += PAGE) {
    const page = await q.getJobs(filter.state as JobType, start, start + PAGE - 1, asc);
    for (const job of page) {
      if (seen.has(job.id)) continue;
      seen.add(job.id);
      if (cutoff !== undefined && recentTime(job, filter.state) < cutoff) {
        if (!asc && finished(filter.state)) return;
        continue;
      }
      if (filter.name !== undefined && job.name !== filter.name) continue;
      yield job;
    }
    // a short page is the last (getJobs leaves out jobs that moved on, so go by what was asked)
    if (page.length === 0) return;
  }
}

/** A job of a listing, with the time a delayed one is due (the delayed set's score), and how many dependencies a waiting parent still waits for. */
export interface ListedJob {
  job: Job;
  runAt?: number;
  unprocessed?: number;
}

export interface JobPage {
  jobs: ListedJob[];
  /** The server's time the listing was made at (ages count from it). */
  now: number;
  /** Whether jobs that match come after this page. */
  more: boolean;
  /** How many jobs are in the state, when no filter is given (a filtered total is not counted). */
  total?: number;
}

/** Matches `offset`..`offset + limit - 1`, newest first, and whether there are more. */
export async function listJobPage(q: Queue, filter: JobFilter, opts: { offset: number; limit: number }): Promise<JobPage> {
  const now = await q.serverTime();
  const jobs: Job[] = [];
  let skipped = 0;
  let more = false;
  for await (const job of matchingJobs(q, filter, now)) {
    if (skipped < opts.offset) {
      skipped++;
      continue;
    }
    if (jobs.length === opts.limit) {
      more = true;
      break;
    }
    jobs.push(job);
  }
  const filtered = filter.name !== undefined || filter.sinceMs !== undefined;
  const total = filtered ? undefined : await q.getJobCountByTypes(filter.state as JobType);
  return { jobs: await withRunAt(q, filter.state, jobs), now, more, ...(total === undefined ? {} : { total }) };
}

/** The jobs with the time each delayed one is due, or the dependencies each waiting parent waits for (nothing for other states). */
export async function withRunAt(q: Queue, state: ListableState, jobs: Job[]): Promise<ListedJob[]> {
  if (state === 'waiting-children') {
    const counts = await Promise.all(jobs.map((j) => q.client.scard(q.keys.deps(j.id))));
    return jobs.map((job, i) => ({ job, unprocessed: counts[i] }));
  }
  if (state !== 'delayed') return jobs.map((job) => ({ job }));
  const scores = await Promise.all(jobs.map((j) => q.client.zscore(q.keys.scheduled, j.id)));
  return jobs.map((job, i) => (scores[i] === null ? { job } : { job, runAt: Number(scores[i]) }));
}

/** The ids of every job that passes the filter, newest first (what --all acts on). */
export async function matchingIds(q: Queue, filter: JobFilter): Promise<string[]> {
  const ids: string[] = [];
  for await (const job of matchingJobs(q, filter, await q.serverTime())) ids.push(job.id);
  return ids;
}

/** What a retry or promote of some ids did (or, on a dry run, would do). */
export interface MoveResult {
  /** The ids moved (a dry run: the ids that would be). */
  moved: string[];
  /** The ids that were not, each with why (no such job, another state, or the server's refusal). */
  problems: { id: string; reason: string }[];
  /** The ids among the problems that name no job at all (a wrong id: the CLI exits 2 for them). */
  notFound?: string[];
}

/**
 * Moves each of `ids` that is in state `need` with `move`; the others are named with the reason.
 * Every id is looked at first (a dry run stops there). A job that changed state between the look
 * and the move is named with the server's refusal. Ids given twice count once.
 */
async function moveEach(q: Queue, ids: string[], need: 'failed' | 'delayed', dryRun: boolean, move: (t: EditTarget, id: string) => Promise<unknown>): Promise<MoveResult> {
  await q.waitUntilReady();
  const unique = [...new Set(ids)];
  const moved: string[] = [];
  const problems: MoveResult['problems'] = [];
  const notFound: string[] = [];
  const target: EditTarget = { client: q.client, keys: q.keys, fence: '' };
  for (let i = 0; i < unique.length; i += CHUNK) {
    const chunk = unique.slice(i, i + CHUNK);
    const states = await Promise.all(chunk.map((id) => q.getJobState(id)));
    const ready: string[] = [];
    chunk.forEach((id, j) => {
      const s = states[j];
      if (s === 'unknown') {
        problems.push({ id, reason: `job ${id} not found in queue ${q.name} (finished jobs may have been removed by retention)` });
        notFound.push(id);
      }
      else if (s !== need) problems.push({ id, reason: `job ${id} is ${s}, not ${need}` });
      else ready.push(id);
    });
    if (dryRun) {
      moved.push(...ready);
      continue;
    }
    const outcomes = await Promise.all(
      ready.map((id) =>
        move(target, id).then(
          () => undefined,
          (err: unknown) => {
            if (err instanceof GlideMQError) return err.message;
            throw err;
          },
        ),
      ),
    );
    ready.forEach((id, j) => {
      const reason = outcomes[j];
      if (reason === undefined) moved.push(id);
      else problems.push({ id, reason });
    });
  }
  return { moved, problems, notFound };
}

/**
 * Failed jobs back to waiting with their attempts made reset (the CLI spec): an operator's retry
 * gives a job all its attempts again, where BullMQ's job.retry() keeps the count.
 */
export function retryFailed(q: Queue, ids: string[], opts: { dryRun?: boolean } = {}): Promise<MoveResult> {
  return moveEach(q, ids, 'failed', !!opts.dryRun, (t, id) => retryJob(t, id, 'failed', { resetAttemptsMade: true }));
}

/** Delayed jobs to waiting now. */
export function promoteDelayed(q: Queue, ids: string[], opts: { dryRun?: boolean } = {}): Promise<MoveResult> {
  return moveEach(q, ids, 'delayed', !!opts.dryRun, (t, id) => promoteJob(t, id));
}

/** One line of an export: what `enqueue --ndjson --envelope` reads. */
export interface Envelope {
  name: string;
  data: unknown;
  opts: JobOptions;
}

/** Ids the queue hands out (custom ids may not be whole numbers: options.ts encodeJob). */
const ASSIGNED_ID = /^-?\d+$/;

/**
 * A job as an envelope that adds the same job again: its name, data, and the options that decide
 * how it runs (priority or LIFO, attempts, backoff, retention, keepLogs, group). A delayed job
 * carries the delay it has left, so it runs about when it would have; a job of another state runs
 * at once. Not carried: the dedup id (a copy would be absorbed by, or block, the original) and
 * the application's timestamp. `keepIds`: a custom job id is carried too, so importing into a
 * queue that still holds the job adds nothing for it; ids the queue handed out never are (another
 * queue hands out its own).
 */
export function envelopeOf(job: Job, opts: { now: number; runAt?: number; keepIds?: boolean }): Envelope {
  const o: JobOptions = {};
  if (opts.keepIds && !ASSIGNED_ID.test(job.id)) o.jobId = job.id;
  if (opts.runAt !== undefined && opts.runAt > opts.now) o.delay = opts.runAt - opts.now;
  if (job.opts.priority > 0) o.priority = job.opts.priority;
  if (job.opts.lifo) o.lifo = true;
  if (job.opts.attempts > 1) o.attempts = job.opts.attempts;
  if (job.opts.backoff !== undefined) o.backoff = job.opts.backoff;
  if (job.opts.removeOnComplete !== undefined) o.removeOnComplete = job.opts.removeOnComplete;
  if (job.opts.removeOnFail !== undefined) o.removeOnFail = job.opts.removeOnFail;
  if (job.opts.keepLogs !== undefined) o.keepLogs = job.opts.keepLogs;
  if (job.groupId !== undefined) o.group = { id: job.groupId };
  return { name: job.name, data: job.data, opts: o };
}

/**
 * Every job that passes the filter as an envelope, in the order the jobs run (the oldest, or the
 * next to run, first), so that importing them queues them in the same order.
 */
export async function* exportEnvelopes(q: Queue, filter: JobFilter, opts: { keepIds?: boolean } = {}): AsyncGenerator<Envelope> {
  const now = await q.serverTime();
  let batch: Job[] = [];
  const flush = async function* () {
    for (const { job, runAt } of await withRunAt(q, filter.state, batch)) yield envelopeOf(job, { now, runAt, keepIds: opts.keepIds });
    batch = [];
  };
  for await (const job of matchingJobs(q, filter, now, true)) {
    batch.push(job);
    if (batch.length >= CHUNK) yield* flush();
  }
  yield* flush();
}
