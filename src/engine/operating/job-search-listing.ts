/**
 * `glidemq jobs --grep`: a page of the jobs of one state whose failure reason, name or data holds
 * a text, found by Queue.search (lua/search.lua) a bounded step at a time, so only the matches
 * leave the server however large the state. --name and --since apply to the matches; --offset
 * skips matches, as a listing's does.
 */
import type { Job } from '../jobs/job.js';
import type { Queue } from '../queue/queue.js';
import { recentTime, withRunAt, type JobFilter, type JobPage } from './job-listing.js';

/** Entries of the state one step looks at (lua/search.lua caps it at 1000). */
const STEP = 500;

/** Whether `job` passes the filter's --name and --since. */
function passes(job: Job, filter: JobFilter, now: number): boolean {
  if (filter.name !== undefined && job.name !== filter.name) return false;
  return filter.sinceMs === undefined || recentTime(job, filter.state) >= now - filter.sinceMs;
}

/**
 * Matches `offset`..`offset + limit - 1`, in the order the search looks (newest first for the
 * finished, delayed and prioritized sets), and whether more match after them.
 */
export async function searchJobPage(q: Queue, filter: JobFilter, grep: string, opts: { offset: number; limit: number }): Promise<JobPage> {
  const now = await q.serverTime();
  const jobs: Job[] = [];
  const seen = new Set<string>();
  let skipped = 0;
  let cursor = '0';
  do {
    const step = await q.search({ state: filter.state, grep, cursor, count: STEP });
    cursor = step.cursor;
    for (const job of step.jobs) {
      // (a job that moved under the steps may be found twice: it is shown once)
      if (seen.has(job.id) || !passes(job, filter, now)) continue;
      seen.add(job.id);
      if (skipped < opts.offset) skipped++;
      else if (jobs.length === opts.limit) return { jobs: await withRunAt(q, filter.state, jobs), now, more: true };
      else jobs.push(job);
    }
  } while (cursor !== '0');
  return { jobs: await withRunAt(q, filter.state, jobs), now, more: false };
}
