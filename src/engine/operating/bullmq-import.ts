/**
 * `glidemq import-bullmq`: copies a BullMQ queue's jobs into a glidemq queue. Read (bullmq-source.ts),
 * mapped (bullmq-mapping.ts), planned, then written through glidemq_restore (lua/restore.lua), which
 * stores an id once: a second run stores nothing twice. Its steps:
 *   - refuse while BullMQ works on the queue (a worker connection named for it, or active jobs),
 *     unless forced: a job copied while a worker runs it would run twice;
 *   - read every job in wait, the legacy paused list, prioritized, delayed, completed and failed,
 *     with its logs, and the job schedulers; active jobs are left to the BullMQ worker that holds them;
 *   - map ids (a whole-number id, or one holding ':' and the like, is renamed bullmq-<id>);
 *   - write (not in a dry run): a paused source pauses the target first, then the jobs, then the
 *     schedulers (a scheduler's pending run in BullMQ's delayed set is not copied: the glidemq
 *     scheduler adds it when it is due);
 *   - count both sides by state.
 */
import type { Client } from '../connecting/connection.js';
import { restoreJobs, type RestoreRecord, type RestoredState } from '../administering/job-restore.js';
import type { Queue } from '../queue/queue.js';
import { BullKeys, readActivity, readJobs, readSchedulers, readStateIds, isPaused, type BullActivity, type BullJob, type BullState } from './bullmq-source.js';
import { glidemqId, isSchedulerRun, recordOf, schedulerOf } from './bullmq-mapping.js';

/** Counts per state, as both sides are compared. */
export interface StateCounts {
  waiting: number;
  paused: number;
  prioritized: number;
  delayed: number;
  completed: number;
  failed: number;
  schedulers: number;
}
export const COUNTED: readonly (keyof StateCounts)[] = ['waiting', 'paused', 'prioritized', 'delayed', 'completed', 'failed', 'schedulers'];

export interface BullImportOptions {
  /** A connection to the server that holds the BullMQ queue. */
  source: Client;
  /** BullMQ's key prefix (default `bull`). */
  sourcePrefix?: string;
  /** The BullMQ queue's name. */
  queue: string;
  /** The glidemq queue to fill (open; the caller closes it). */
  target: Queue;
  dryRun?: boolean;
  force?: boolean;
}

export interface BullImportResult {
  queue: string;
  into: string;
  dryRun: boolean;
  /** Why nothing was done: BullMQ is working on the queue (without force). */
  refused?: string;
  activity: BullActivity;
  /** The source's jobs by state (the ones copied: active jobs are not), and its schedulers. */
  source: StateCounts;
  /** What this run wrote (a dry run: would write), by state. */
  imported: StateCounts;
  /** Jobs and schedulers there from an earlier run, left as they were. */
  present: number;
  /** Log lines copied with the jobs written. */
  logLines: number;
  /** Ids glidemq could not keep, and the ids they got. */
  renamed: { from: string; to: string }[];
  /** What was not copied, and why. */
  skipped: { id: string; why: string }[];
  /** The target's counts after the run (a dry run: as they are). */
  target: StateCounts;
  /** The two sides count the same in every state (a dry run: once what it would write is written). */
  matches: boolean;
}

function zero(): StateCounts {
  return { waiting: 0, paused: 0, prioritized: 0, delayed: 0, completed: 0, failed: 0, schedulers: 0 };
}

/** The count a restored state adds to: a paused queue's waiting jobs count under paused, as glidemq's own counts do. */
function countedAs(state: RestoredState, paused: boolean): keyof StateCounts {
  return state === 'waiting' && paused ? 'paused' : state;
}

/** Why the import should not run now, or undefined. */
export function refusalOf(a: BullActivity, queue: string): string | undefined {
  const why: string[] = [];
  if (a.workers.length) why.push(`${a.workers.length} BullMQ worker connection${a.workers.length === 1 ? '' : 's'} (CLIENT LIST: ${a.workers.join(', ')})`);
  if (a.active) why.push(`${a.active} active job${a.active === 1 ? '' : 's'} (${a.locked} held under a worker's lock)`);
  if (!why.length) return undefined;
  return `BullMQ is working on queue "${queue}": ${why.join(' and ')}; stop its workers first (a job copied while one runs it would run twice), or pass --force to copy the jobs that are not active anyway`;
}

async function targetCounts(target: Queue): Promise<StateCounts> {
  const c = await target.getJobCounts();
  return {
    waiting: c.waiting,
    paused: c.paused,
    prioritized: c.prioritized,
    delayed: c.delayed,
    completed: c.completed,
    failed: c.failed,
    schedulers: await target.getJobSchedulersCount(),
  };
}

/** Which of `ids` already name a job in the target (a dry run's count of what is there already). */
async function existingIds(target: Queue, ids: string[]): Promise<Set<string>> {
  const out = new Set<string>();
  for (let at = 0; at < ids.length; at += 500) {
    const page = ids.slice(at, at + 500);
    const p = target.client.pipeline();
    for (const id of page) p.exists(target.keys.job(id));
    ((await p.exec()) ?? []).forEach(([, n], i) => {
      if (Number(n) === 1) out.add(page[i]);
    });
  }
  return out;
}

interface JobPlan {
  records: RestoreRecord[];
  renamed: { from: string; to: string }[];
  skipped: { id: string; why: string }[];
}

/** The records to restore: jobs mapped to glidemq ids; scheduler runs, ids too long and ids two jobs would share left out. */
function planJobs(jobs: BullJob[]): JobPlan {
  const plan: JobPlan = { records: [], renamed: [], skipped: [] };
  const taken = new Map<string, string>();
  for (const job of jobs) {
    if (job.state === 'delayed' && isSchedulerRun(job)) {
      plan.skipped.push({ id: job.id, why: "a job scheduler's next run: the imported scheduler adds it when it is due" });
      continue;
    }
    const id = glidemqId(job.id);
    if (id === undefined) {
      plan.skipped.push({ id: job.id, why: 'its id, renamed for glidemq, would be longer than 256 bytes' });
      continue;
    }
    const other = taken.get(id);
    if (other !== undefined) {
      plan.skipped.push({ id: job.id, why: `its glidemq id ${id} is job ${other}'s already` });
      continue;
    }
    taken.set(id, job.id);
    if (id !== job.id) plan.renamed.push({ from: job.id, to: id });
    plan.records.push(recordOf(job, id));
  }
  return plan;
}

/** Copies one BullMQ queue into `target` (see the header); a dry run reads both sides and writes nothing. */
export async function importBullmqQueue(o: BullImportOptions): Promise<BullImportResult> {
  const k = new BullKeys(o.queue, o.sourcePrefix ?? 'bull');
  const dryRun = !!o.dryRun;
  const activity = await readActivity(o.source, k);
  const refused = o.force ? undefined : refusalOf(activity, o.queue);
  const result: BullImportResult = {
    queue: o.queue, into: o.target.name, dryRun, activity, source: zero(), imported: zero(), present: 0, logLines: 0,
    renamed: [], skipped: [], target: zero(), matches: false,
  };
  if (refused) {
    result.refused = refused;
    result.target = await targetCounts(o.target);
    return result;
  }
  const paused = await isPaused(o.source, k);
  const ids = await readStateIds(o.source, k);
  const jobs: BullJob[] = [];
  for (const [state, list] of ids) jobs.push(...(await readJobs(o.source, k, state as BullState, list)));
  const schedulers = await readSchedulers(o.source, k);
  const plan = planJobs(jobs);
  result.renamed = plan.renamed;
  result.skipped = plan.skipped;
  for (const r of plan.records) result.source[countedAs(r.state, paused)]++;
  result.source.schedulers = schedulers.length;

  if (paused && !dryRun) await o.target.pause();
  let written: Set<string>;
  if (dryRun) {
    const there = await existingIds(o.target, plan.records.map((r) => r.id));
    written = new Set(plan.records.map((r) => r.id).filter((id) => !there.has(id)));
  } else {
    written = await restoreJobs(o.target.client, o.target.keys, plan.records);
  }
  for (const r of plan.records) {
    if (written.has(r.id)) {
      result.imported[countedAs(r.state, paused)]++;
      result.logLines += r.logs.length;
    } else {
      result.present++;
    }
  }
  for (const s of schedulers) {
    const mapped = schedulerOf(s);
    if ('why' in mapped) {
      result.skipped.push({ id: `scheduler ${s.id}`, why: mapped.why });
      continue;
    }
    if (await o.target.getScheduler(s.id)) {
      result.present++;
      continue;
    }
    if (!dryRun) {
      try {
        await o.target.upsertScheduler(s.id, mapped.timing, mapped.template);
      } catch (err) {
        result.skipped.push({ id: `scheduler ${s.id}`, why: (err as Error).message });
        continue;
      }
    }
    result.imported.schedulers++;
  }
  result.target = await targetCounts(o.target);
  // a dry run compares what the target would hold: what it holds, and what the run would add
  result.matches = COUNTED.every((s) => result.source[s] === result.target[s] + (dryRun ? result.imported[s] : 0));
  return result;
}
