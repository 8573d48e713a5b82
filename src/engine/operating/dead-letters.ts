/**
 * Sending dead letters back to the queues they failed in (`glidemq retry <dlq> --from-dead-letter`,
 * README "Dead letters"). A dead letter (lua/dead-letters.lua) is a job in the dead-letter queue's
 * failed set that names its source queue and job id (originalQueue, originalJobId). Sending it back:
 *   - the source job still in its failed set (the usual case: a dead letter is a copy) is retried
 *     there, with all its attempts again, as `glidemq retry` retries it;
 *   - a source job that is back already (waiting, active, completed: someone retried it) is left;
 *   - a source job that is gone (its removeOnFail) is added again from the dead letter (its name,
 *     data and running options), its own id kept when it was a custom one, with a deduplication id
 *     of the dead letter's for a day, so a resend adds it once;
 * and then the dead letter is removed from the dead-letter queue. Each step is safe to repeat: a
 * resend after a crash finds the source job back (or the dedup id taken) and only removes the
 * letter, so a dead letter goes back once.
 */
import { invalid } from '../shared/errors.js';
import type { Job } from '../jobs/job.js';
import { Queue } from '../queue/queue.js';
import { envelopeOf, type MoveResult } from './job-listing.js';

/** One dead letter sent back: its id in the dead-letter queue, where it went and how. */
export interface SentLetter {
  id: string;
  queue: string;
  jobId: string;
  /** retried: the source job was failed and waits again; present: it was back already; added: it was gone and was added again (jobId: the new job's). None in a dry run. */
  how?: 'retried' | 'present' | 'added';
}

export interface ResendResult extends MoveResult {
  sent: SentLetter[];
}

/** How long a dead letter added again blocks a second add of itself (ms): a resend within it adds nothing. */
const RESEND_DEDUP_MS = 24 * 3600_000;
/** Dead letters read per page when every one is sent back. */
const PAGE = 500;

/** The dead letters of the dead-letter queue `dlq`: those named, or every one in its failed set. */
async function lettersOf(dlq: Queue, ids: string[] | undefined, result: MoveResult): Promise<Job[]> {
  const problems = result.problems;
  if (ids !== undefined) {
    const out: Job[] = [];
    for (const id of ids) {
      const job = await dlq.getJob(id);
      if (!job) {
        problems.push({ id, reason: `${dlq.name}: no job ${id}` });
        (result.notFound ??= []).push(id);
      } else if (!job.originalQueue || !job.originalJobId) problems.push({ id, reason: `${dlq.name}: job ${id} is no dead letter (it names no source queue)` });
      else if (job.state !== 'failed') problems.push({ id, reason: `${dlq.name}: dead letter ${id} is ${job.state}, not failed (it was retried inside the dead-letter queue)` });
      else out.push(job);
    }
    return out;
  }
  const out: Job[] = [];
  for (let start = 0; ; start += PAGE) {
    const page = await dlq.getJobs('failed', start, start + PAGE - 1);
    out.push(...page.filter((j) => j.originalQueue && j.originalJobId));
    if (page.length < PAGE) return out;
  }
}

/** Sends `letter` back to its source queue `source` (see the header); returns how. */
async function sendBack(source: Queue, letter: Job): Promise<SentLetter> {
  const jobId = letter.originalJobId!;
  const base = { id: letter.id, queue: source.name, jobId };
  const existing = await source.getJob(jobId);
  if (existing && existing.state === 'failed') {
    await existing.retry('failed', { resetAttemptsMade: true });
    return { ...base, how: 'retried' };
  }
  if (existing) return { ...base, how: 'present' };
  const { name, data, opts } = envelopeOf(letter, { now: 0, keepIds: false });
  // the source's own id when it was a custom one (an id the queue handed out cannot be given)
  if (!/^-?\d+$/.test(jobId)) opts.jobId = jobId;
  const added = await source.add(name, data, { ...opts, deduplication: { id: `dead-letter-${letter.id}`, ttl: RESEND_DEDUP_MS } });
  return { ...base, jobId: added.id, how: added.created === false || added.deduplicated ? 'present' : 'added' };
}

/**
 * Sends dead letters of the dead-letter queue `dlq` back to their source queues: those named by
 * `ids`, or every one. `dryRun`: lists them and changes nothing. The source queues are reached
 * through `dlq`'s connection and prefix.
 */
export async function resendDeadLetters(dlq: Queue, ids: string[] | undefined, opts: { dryRun?: boolean } = {}): Promise<ResendResult> {
  if (ids !== undefined && ids.length === 0) throw invalid('give the ids of the dead letters to send back, or none for every one');
  await dlq.waitUntilReady();
  const result: ResendResult = { moved: [], problems: [], sent: [] };
  const letters = await lettersOf(dlq, ids, result);
  const sources = new Map<string, Queue>();
  try {
    for (const letter of letters) {
      const name = letter.originalQueue!;
      if (opts.dryRun) {
        result.moved.push(letter.id);
        result.sent.push({ id: letter.id, queue: name, jobId: letter.originalJobId! });
        continue;
      }
      let source = sources.get(name);
      if (!source) {
        source = new Queue(name, { connection: dlq.client, prefix: dlq.keys.prefix });
        sources.set(name, source);
      }
      try {
        const sent = await sendBack(source, letter);
        await letter.remove();
        result.moved.push(letter.id);
        result.sent.push(sent);
      } catch (err) {
        result.problems.push({ id: letter.id, reason: `${dlq.name}: dead letter ${letter.id} was not sent back to ${name}: ${(err as Error).message}` });
      }
    }
  } finally {
    await Promise.all([...sources.values()].map((q) => q.close()));
  }
  return result;
}

/** Whether queue `q` holds dead letters: it is some queue's dead-letter queue (lua/dead-letters.lua counts what it received). */
export async function holdsDeadLetters(q: Queue): Promise<boolean> {
  await q.waitUntilReady();
  return Number(await q.client.hget(q.keys.meta, 'deadLettersIn')) > 0;
}
