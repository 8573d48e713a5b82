/**
 * Reading a queue's dead letters (README "Dead letters"): the jobs in the failed set of its
 * dead-letter queue (lua/dead-letters.lua), each carrying originalQueue / originalJobId. The
 * dead-letter queue is the one the Queue was made with, else the one stored in the queue's meta.
 */
import type { Client } from '../connecting/connection.js';
import { QueueKeys } from '../shared/keys.js';
import { Job } from '../jobs/job.js';
import { checkPage, listJobs } from '../inspecting/job-queries.js';
import { readDeadLetterQueue } from '../administering/dead-letters.js';

/**
 * The dead letters of queue `keys` in its dead-letter queue's failed set, newest first, page
 * `start`..`end` (inclusive; negative counts from the end); none when the queue has no dead-letter
 * queue. `configured`: the dead-letter queue the caller was made with, if any.
 */
export async function readDeadLetterJobs(client: Client, keys: QueueKeys, configured: string | undefined, start: number, end: number): Promise<Job[]> {
  checkPage(start, end, 'getDeadLetterJobs');
  const name = configured ?? (await readDeadLetterQueue(client, keys));
  if (name === undefined) return [];
  const dk = new QueueKeys(name, keys.prefix);
  const getJob = async (id: string): Promise<Job | undefined> => {
    const h = (await client.hgetall(dk.job(id))) as Record<string, string>;
    return h && Object.keys(h).length > 0 ? Job.fromFields({ ...h, id }) : undefined;
  };
  return listJobs({ client, keys: dk, getJob }, ['failed'], start, end, false);
}
