/**
 * What `glidemq worker` says when its lock keeper finds a claim lost (the Worker's 'lockLost': the
 * run was aborted through its signal). The job is looked up once to say why: gone means it was
 * removed while it ran (`glidemq remove --force`); otherwise its lock ran out and stalled recovery
 * took it back. A rare event: the look-up is a read on a connection of its own, never per job.
 */
import { Queue, type QueueOptions } from '../engine/queue/queue.js';
import type { Voice } from './worker-voice.js';

export async function tellLostClaim(queueName: string, connection: Pick<QueueOptions, 'connection' | 'prefix'>, id: string, voice: Voice): Promise<void> {
  const q = new Queue(queueName, connection);
  let state: string;
  try {
    state = await q.getJobState(id);
  } catch {
    state = 'not known'; // the server cannot say: the line still names the job
  } finally {
    void q.close().catch(() => undefined);
  }
  const text =
    state === 'unknown'
      ? `job ${id} was removed while it ran (glidemq remove --force): its run was aborted and its result is not kept`
      : `job ${id}: the claim was lost (its lock ran out; the job is ${state} now): its run was aborted and its result is not kept`;
  voice.say('warn', 'claim-lost', text, { id, removed: state === 'unknown' });
}
