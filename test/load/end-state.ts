/**
 * What a queue must hold once a load run has drained: nothing waiting, delayed or claimed, no stream
 * entry left behind, exactly one job hash per kept completed/failed job, the kept sets cut to their
 * count rule, and per-minute metrics that add up to the outcomes the workers reported.
 */
import type { Queue } from '../../src/engine/queue/queue.js';
import { CONSUMER_GROUP } from '../../src/engine/shared/keys.js';
import type { QueuePlan } from './plan.js';
import type { Tally } from './tally.js';

async function countKeys(queue: Queue, pattern: string): Promise<number> {
  let cursor = '0';
  let n = 0;
  do {
    const [next, keys] = await queue.client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    n += keys.length;
  } while (cursor !== '0');
  return n;
}

export async function endStateProblems(queue: Queue, plan: QueuePlan, tally: Tally, startedAt: number): Promise<string[]> {
  const out: string[] = [];
  const q = queue.name;
  const expect = (what: string, got: number, want: number) => {
    if (got !== want) out.push(`${q}: ${what} is ${got}, expected ${want}`);
  };
  const c = await queue.getJobCounts();
  for (const state of ['waiting', 'active', 'delayed', 'prioritized', 'listActive'] as const) expect(state, c[state], 0);
  const k = queue.keys;
  expect('stream length (entries left after ack)', await queue.client.xlen(k.stream), 0);
  const pending = (await queue.client.xpending(k.stream, CONSUMER_GROUP)) as unknown[];
  expect('pending entries', Number(pending[0]), 0);
  expect('LIFO list', await queue.client.llen(k.lifo), 0);
  const completedSet = await queue.client.zcard(k.completed);
  const failedSet = await queue.client.zcard(k.failed);
  expect('completed count vs completed set', c.completed, completedSet);
  expect('failed count vs failed set', c.failed, failedSet);
  expect('job hashes vs kept jobs', await countKeys(queue, k.jobPattern), completedSet + failedSet);
  const completed = tally.countFor(q, tally.completed);
  const failed = tally.countFor(q, tally.failed);
  const { completedCount, failedCount } = plan.caps;
  if (completedCount !== undefined) expect('completed set (count rule)', completedSet, Math.min(completedCount, completed));
  if (failedCount !== undefined) expect('failed set (count rule)', failedSet, Math.min(failedCount, failed));
  const m = await queue.getMetrics({ from: startedAt - 60_000 });
  expect('metrics: completed attempts', m.completed, completed);
  expect('metrics: failed attempts (2 per designed failure)', m.failed, 2 * failed);
  return out;
}
