/**
 * `glidemq import-bullmq`: copies a BullMQ queue's jobs into a glidemq queue. Read (bullmq-source.ts),
 * mapped (bullmq-mapping.ts), planned, then written through glidemq_restore (lua/restore.lua), which
 * stores an id once: a second run stores nothing twice. Its steps:
 *   - refuse while BullMQ works on the queue (a worker connection named for it, or active jobs),
 *     unless forced: a job copied while a worker runs it would run twice;
 *   - read every job in waiting-children, wait, the legacy paused list, prioritized, delayed,
 *     completed and failed, with its logs, its flow links (a child's parent; a parent's children
 *     pending, completed and ignored) and its dedup key, and the job schedulers; active jobs are
 *     left to the BullMQ worker that holds them;
 *   - map ids (a whole-number id, or one holding ':' and the like, is renamed bullmq-<id>), and
 *     flow links to glidemq job keys: a job of the queue imported goes to the target queue, a job
 *     of another BullMQ queue to the glidemq queue of that name (import it too, parents' queues
 *     first: a parent copied after its children counts those that finished in glidemq meanwhile);
 *   - write (not in a dry run): a paused source pauses the target first, then the schedulers,
 *     then the jobs (a scheduler's next run, a job waiting or delayed in BullMQ, is not copied when
 *     the scheduler is: the glidemq scheduler adds it when it is due);
 *   - count both sides by state.
 */
import type { Client } from '../connecting/connection.js';
import { restoreJobs, type RestoreRecord, type RestoredState } from '../administering/job-restore.js';
import type { Queue } from '../queue/queue.js';
import { QueueKeys } from '../shared/keys.js';
import { BullKeys, queueExists, readActivity, readJobs, readSchedulers, readStateIds, isPaused, type BullActivity, type BullJob } from './bullmq-source.js';
import { flowOf, glidemqId, recordOf, RENAMED_ID_PREFIX, schedulerOf, schedulerRunId, type LinkOf } from './bullmq-mapping.js';

/** Counts per state, as both sides are compared. */
export interface StateCounts {
  waiting: number;
  paused: number;
  prioritized: number;
  delayed: number;
  completed: number;
  failed: number;
  /** Parents waiting for their children. */
  'waiting-children': number;
  schedulers: number;
}
export const COUNTED: readonly (keyof StateCounts)[] = ['waiting', 'paused', 'prioritized', 'delayed', 'completed', 'failed', 'waiting-children', 'schedulers'];

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
  /** BullMQ's key prefix read. */
  sourcePrefix: string;
  /** Any key of the BullMQ queue exists (false: a queue name or prefix that is probably wrong). */
  sourceFound: boolean;
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
  /** Dedup ids copied with the jobs written: a glidemq add with one is deduplicated while the copied job holds it. */
  dedupIds: number;
  /** Other BullMQ queues the flow links of the jobs read name (their glidemq queues of the same name hold the other ends: import them too). */
  linkedQueues: string[];
  /** Ids glidemq could not keep, and the ids they got. */
  renamed: RenamedIds;
  /** What was not copied, and why. */
  skipped: { id: string; why: string }[];
  /** The target's counts after the run (a dry run: as they are). */
  target: StateCounts;
  /** The two sides count the same in every state (a dry run: once what it would write is written). */
  matches: boolean;
}

function zero(): StateCounts {
  return { waiting: 0, paused: 0, prioritized: 0, delayed: 0, completed: 0, failed: 0, 'waiting-children': 0, schedulers: 0 };
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
    'waiting-children': c['waiting-children'],
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

/** Ids glidemq could not keep: BullMQ's numeric ids (counted: each became bullmq-<id>), and the others, listed. */
export interface RenamedIds {
  /** How a renamed id is formed. */
  as: string;
  /** Whole-number ids renamed (BullMQ's own ids). */
  numeric: number;
  /** Other ids renamed (holding ':', braces, whitespace or control characters), each with its new id. */
  others: { from: string; to: string }[];
}

/** Source jobs read per page: each page is read, mapped and written before the next is read. */
const PAGE = 500;

interface JobPlan {
  records: RestoreRecord[];
  skipped: { id: string; why: string }[];
}

/**
 * The records to restore from one page of jobs: jobs mapped to glidemq ids; scheduler runs, ids too
 * long, ids two jobs would share, and the next runs of schedulers imported or there (`covered`)
 * left out. `taken` (glidemq id -> BullMQ id) spans the whole run;
 * renamed ids are added to `renamed`.
 */
function planJobs(jobs: BullJob[], taken: Map<string, string>, renamed: RenamedIds, covered: Set<string>, linkOf: LinkOf): JobPlan {
  const plan: JobPlan = { records: [], skipped: [] };
  for (const job of jobs) {
    if (job.state !== 'completed' && job.state !== 'failed' && covered.has(job.id)) {
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
    if (id !== job.id) {
      if (/^-?\d+$/.test(job.id)) renamed.numeric++;
      else renamed.others.push({ from: job.id, to: id });
    }
    const { flow, lost } = flowOf(job, linkOf);
    for (const key of lost) plan.skipped.push({ id: job.id, why: `its flow link to ${key} (a job under another prefix, or an id glidemq cannot take) is not copied` });
    plan.records.push(recordOf(job, id, flow));
  }
  return plan;
}

/**
 * Which records of `records` this run writes (a dry run: would write; the rest are there already);
 * `dedupTaken` gets those whose dedup id another job of the target holds.
 */
async function writeRecords(target: Queue, records: RestoreRecord[], dryRun: boolean, dedupTaken: Set<string>): Promise<Set<string>> {
  if (!dryRun) return restoreJobs(target.client, target.keys, records, dedupTaken);
  const there = await existingIds(target, records.map((r) => r.id));
  return new Set(records.map((r) => r.id).filter((id) => !there.has(id)));
}

/**
 * The glidemq job key of a BullMQ job key of prefix `k`: a job of queue `queue` goes to `target`, a
 * job of another queue to the glidemq queue of that name (target's prefix), under its glidemq id.
 */
function linkMapper(k: BullKeys, queue: string, target: Queue, others: Set<string>): LinkOf {
  return (bullKey) => {
    const at = k.splitJobKey(bullKey);
    const id = at && glidemqId(at.id);
    if (!at || id === undefined) return undefined;
    if (at.queue !== queue) others.add(at.queue);
    try {
      return new QueueKeys(at.queue === queue ? target.name : at.queue, target.keys.prefix).job(id);
    } catch {
      return undefined; // a BullMQ queue name glidemq refuses
    }
  };
}

/** Copies one BullMQ queue into `target` (see the header); a dry run reads both sides and writes nothing. */
export async function importBullmqQueue(o: BullImportOptions): Promise<BullImportResult> {
  const k = new BullKeys(o.queue, o.sourcePrefix ?? 'bull');
  const dryRun = !!o.dryRun;
  const activity = await readActivity(o.source, k);
  const refused = o.force ? undefined : refusalOf(activity, o.queue);
  const result: BullImportResult = {
    queue: o.queue, into: o.target.name, dryRun, sourcePrefix: k.prefix, sourceFound: await queueExists(o.source, k), activity, source: zero(), imported: zero(), present: 0, logLines: 0,
    dedupIds: 0, linkedQueues: [], renamed: { as: `${RENAMED_ID_PREFIX}<id>`, numeric: 0, others: [] }, skipped: [], target: zero(), matches: false,
  };
  if (refused) {
    result.refused = refused;
    result.target = await targetCounts(o.target);
    return result;
  }
  const paused = await isPaused(o.source, k);
  if (paused && !dryRun) await o.target.pause();
  // Schedulers first. A scheduler's next run waits (or is delayed) in BullMQ as a job: the glidemq
  // scheduler, which starts at that run, adds it again, so that job is copied only when its
  // scheduler could not be.
  const schedulers = await readSchedulers(o.source, k);
  result.source.schedulers = schedulers.length;
  const covered = new Set<string>();
  for (const s of schedulers) {
    const mapped = schedulerOf(s);
    if ('why' in mapped) {
      result.skipped.push({ id: `scheduler ${s.id}`, why: mapped.why });
      continue;
    }
    if (await o.target.getScheduler(s.id)) {
      result.present++;
      covered.add(schedulerRunId(s.id, s.nextRun));
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
    covered.add(schedulerRunId(s.id, s.nextRun));
  }
  const taken = new Map<string, string>();
  const linked = new Set<string>();
  const linkOf = linkMapper(k, o.queue, o.target, linked);
  for (const [state, list] of await readStateIds(o.source, k)) {
    for (let at = 0; at < list.length; at += PAGE) {
      const plan = planJobs(await readJobs(o.source, k, state, list.slice(at, at + PAGE)), taken, result.renamed, covered, linkOf);
      result.skipped.push(...plan.skipped);
      const dedupTaken = new Set<string>();
      const written = await writeRecords(o.target, plan.records, dryRun, dedupTaken);
      for (const r of plan.records) {
        result.source[countedAs(r.state, paused)]++;
        if (written.has(r.id)) {
          result.imported[countedAs(r.state, paused)]++;
          result.logLines += r.logs.length;
          if (r.dedup && dedupTaken.has(r.id)) {
            result.skipped.push({ id: r.id, why: `its dedup id ${r.dedup.id} is held by another job of ${o.target.name}: the job is copied without it` });
          } else if (r.dedup) {
            result.dedupIds++;
          }
        } else {
          result.present++;
        }
      }
    }
  }
  result.linkedQueues = [...linked].sort();
  result.target = await targetCounts(o.target);
  // a dry run compares what the target would hold: what it holds, and what the run would add
  result.matches = COUNTED.every((s) => result.source[s] === result.target[s] + (dryRun ? result.imported[s] : 0));
  return result;
}
