/**
 * The invariants the model test checks after every step, read straight from the queue's Valkey
 * structures (never from glidemq's own reports alone): every job the model added is in exactly one
 * place and its hash state agrees with it, the counts glidemq reports equal the structures, the
 * list-active counter equals the claimed priority/LIFO/group jobs, no job hash exists that the
 * model did not add, and no finished job ran more often than its attempts plus the crashes it met.
 */
import type { Redis } from 'ioredis';
import type { Queue } from '../../src/engine/queue/queue.js';

export type Mode = 'ok' | 'fail-once' | 'fail' | 'step';

export interface ModelJob {
  id: string;
  mode: Mode;
  /** Processor runs seen (in-process calls and child-process starts). */
  runs: number;
  /** Crashes (worker SIGKILL, server SIGKILL) that met this job while it was running. */
  crashes: number;
  /** One line per run: the claim's fence, who ran it, when (so a failure shows how each run came). */
  runLog?: string[];
}

/** Runs a job needs without faults: a retry or a step adds one. */
export const BASE_RUNS: Record<Mode, number> = { ok: 1, 'fail-once': 2, fail: 1, step: 2 };

/** Where a job may be, and the hash states each place allows. */
const STATES_OF: Record<string, string[]> = {
  'stream waiting': ['waiting'],
  // delivered by a blocking read but not yet activated (its reader died in between) is still pending
  'stream pending': ['active', 'waiting'],
  scheduled: ['delayed'],
  prioritized: ['prioritized'],
  lifo: ['waiting'],
  'list-active-ids': ['active'],
  'group waiting': ['waiting'],
  completed: ['completed'],
  failed: ['failed'],
};

export async function invariantProblems(q: Queue, jobs: ReadonlyMap<string, ModelJob>, groups: readonly string[]): Promise<string[]> {
  const c = q.client as Redis;
  const k = q.keys;
  const problems: string[] = [];
  const places = new Map<string, string[]>();
  const put = (id: string, place: string) => {
    const list = places.get(id) ?? [];
    list.push(place);
    places.set(id, list);
  };

  const entries = (await c.exists(k.stream)) ? ((await c.xrange(k.stream, '-', '+')) as [string, string[]][]) : [];
  const pending = entries.length ? ((await c.xpending(k.stream, 'workers', '-', '+', 100000)) as [string][]) : [];
  const pendingIds = new Set(pending.map((p) => p[0]));
  const lastDelivered = entries.length ? await lastDeliveredId(q) : '0-0';
  const sids = new Map<string, string>();
  for (const [sid, fields] of entries) {
    const id = fieldOf(fields, 'id');
    if (pendingIds.has(sid)) put(id, 'stream pending');
    else if (streamIdAfter(sid, lastDelivered)) put(id, 'stream waiting');
    else problems.push(`stream entry ${sid} of job ${id} was delivered and acked but is still in the stream`);
    sids.set(id, sid);
  }
  for (const id of await c.zrange(k.scheduled, '0', '-1')) put(id, 'scheduled');
  for (const id of await c.zrange(k.prioritized, '0', '-1')) put(id, 'prioritized');
  for (const id of await c.lrange(k.lifo, 0, -1)) put(id, 'lifo');
  const listActiveIds = await c.smembers(k.listActiveIds);
  for (const id of listActiveIds) put(id, 'list-active-ids');
  // A group's line holds its waiting jobs and, in an ordered group, the delayed jobs added to it,
  // which hold their place there while they are in the scheduled set (lua/group.lua): those count
  // in the group's `delayed`, the waiting ones in meta's groupWaiting.
  let groupWaiting = 0;
  for (const g of groups) {
    const ids = await c.zrange(k.groupJobs(g), '0', '-1');
    let holding = 0;
    for (const id of ids) {
      if ((await c.hget(k.job(id), 'state')) === 'delayed') {
        holding++;
        if (!places.get(id)?.includes('scheduled')) problems.push(`job ${id} holds its place in group ${g}'s line as delayed but is not in the scheduled set`);
      } else {
        groupWaiting++;
        put(id, 'group waiting');
      }
    }
    const recorded = Number((await c.hget(k.group(g), 'delayed')) ?? 0);
    if (recorded !== holding) problems.push(`group ${g} records ${recorded} delayed jobs holding their place, its line holds ${holding}`);
  }
  for (const id of await c.zrange(k.completed, '0', '-1')) put(id, 'completed');
  for (const id of await c.zrange(k.failed, '0', '-1')) put(id, 'failed');

  const states = new Map<string, Record<string, string>>();
  for (const [id, job] of jobs) {
    const h = (await c.hgetall(k.job(id))) as Record<string, string>;
    states.set(id, h);
    const where = places.get(id) ?? [];
    if (!h.state) {
      problems.push(`job ${id} (${job.mode}) lost: no hash${where.length ? `, still in ${where.join(', ')}` : ''}`);
      continue;
    }
    if (where.length === 0) problems.push(`job ${id} lost: state ${h.state} but in no structure`);
    else if (where.length > 1) problems.push(`job ${id} is in ${where.length} places at once: ${where.join(', ')}`);
    else if (!STATES_OF[where[0]].includes(h.state)) problems.push(`job ${id} is in ${where[0]} but its state is ${h.state}`);
    if (where[0]?.startsWith('stream') && sids.get(id) !== h.sid) problems.push(`job ${id}: its stream entry ${sids.get(id)} is not its sid ${h.sid}`);
    if (h.state === 'completed' || h.state === 'failed') {
      const most = BASE_RUNS[job.mode] + job.crashes;
      if (job.runs < 1) problems.push(`job ${id} is ${h.state} but never ran`);
      if (job.runs > most) {
        const how = job.runLog?.length ? `; runs: ${job.runLog.join('; ')}` : '';
        problems.push(`job ${id} (${job.mode}) ran ${job.runs} times with ${job.crashes} crashes: at most ${most} allowed${how}`);
      }
    }
  }
  for (const id of places.keys()) if (!jobs.has(id)) problems.push(`job ${id} is in ${places.get(id)!.join(', ')} but the model never added it`);
  for (const id of await jobHashIds(q)) if (!jobs.has(id)) problems.push(`job hash ${id} exists but the model never added it (re-created by a late write?)`);

  const count = (place: string) => [...places.values()].filter((p) => p[0] === place).length;
  const counts = await q.getJobCounts();
  // a paused queue's waiting jobs count under paused, not under waiting too
  const inLine = count('stream waiting') + count('lifo') + count('group waiting');
  const expected = {
    waiting: counts.isPaused ? 0 : inLine,
    paused: counts.isPaused ? inLine : 0,
    active: count('stream pending') + count('list-active-ids'),
    delayed: count('scheduled'),
    prioritized: count('prioritized'),
    completed: count('completed'),
    failed: count('failed'),
    listActive: listActiveIds.length,
  };
  for (const [name, want] of Object.entries(expected)) {
    const got = counts[name as keyof typeof expected];
    if (got !== want) problems.push(`count ${name} is ${got} but the structures hold ${want}`);
  }
  const metaGroupWaiting = Number((await c.hget(k.meta, 'groupWaiting')) ?? 0);
  if (metaGroupWaiting !== groupWaiting) problems.push(`meta groupWaiting is ${metaGroupWaiting} but the group lists hold ${groupWaiting}`);
  const counter = Number((await c.get(k.listActive)) ?? 0);
  if (counter < 0) problems.push(`list-active is negative: ${counter}`);
  return problems;
}

async function lastDeliveredId(q: Queue): Promise<string> {
  const groups = (await (q.client as Redis).xinfo('GROUPS', q.keys.stream)) as unknown[][];
  for (const g of groups) {
    const name = fieldOf(g as string[], 'name');
    if (name === 'workers') return fieldOf(g as string[], 'last-delivered-id');
  }
  return '0-0';
}

async function jobHashIds(q: Queue): Promise<string[]> {
  const ids: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await (q.client as Redis).scan(cursor, 'MATCH', q.keys.jobPattern, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const id = key.slice(q.keys.jobPrefix.length);
      if (!id.endsWith(':logs')) ids.push(id);
    }
  } while (cursor !== '0');
  return ids;
}

function fieldOf(fields: unknown[], name: string): string {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return String(fields[i + 1]);
  return '';
}

function streamIdAfter(a: string, b: string): boolean {
  const [am, as] = a.split('-').map(BigInt);
  const [bm, bs] = b.split('-').map(BigInt);
  return am > bm || (am === bm && as > bs);
}
