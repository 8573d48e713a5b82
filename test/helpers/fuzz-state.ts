/**
 * The keyspace the function fuzz starts every call from: one queue and one broadcast put into a
 * realistic state through the real engine API (jobs of every kind waiting, some active and held by
 * a worker that is gone, completed, failed, retrying, parked step jobs, groups, dedup entries,
 * schedulers, metrics, broadcast subscriptions with pending, retrying and dead messages), then the
 * facts the argument generator needs (ids by state, fences, owners, entry ids) read back from Valkey.
 * Built through the engine rather than by hand so the functions meet the state their real callers
 * leave behind, and stay meeting it when the engine changes.
 */
import { Redis } from 'ioredis';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker } from '../../src/engine/broadcast/broadcast-worker.js';
import { BroadcastKeys, QueueKeys } from '../../src/engine/shared/keys.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { writeCount } from './fuzz-keyspace.js';

export const FUZZ_QUEUE = 'fz';
export const FUZZ_BROADCAST = 'fzb';
export const SUBSCRIPTIONS = ['subA', 'subB'] as const;
/** An id no job has: calls naming it meet a missing job. */
export const MISSING_ID = '987654321';
const HOUR = 3_600_000;
/** Long enough that nothing held in the state is reclaimed or retried while a run lasts. */
const LONG = 24 * HOUR;
const BUILD_WAIT_MS = 15_000;

/** Queue settings a batch runs under (chosen from its seed). */
export interface Variant {
  paused: boolean;
  globalConcurrency: number;
}

export interface ActiveJob {
  id: string;
  fence: string;
  owner: string;
  /** 's' stream, 'p' priority, 'l' LIFO, 'g' group. */
  src: string;
}

export interface SubscriptionFacts {
  name: string;
  /** Pending entries: id, owning consumer, fence (n:<id>, '' when none). */
  pending: { id: string; consumer: string; fence: string }[];
  retrying: string[];
}

export interface Facts {
  queue: QueueKeys;
  broadcast: BroadcastKeys;
  variant: Variant;
  /** Consumer that holds the active jobs (the worker that was stopped under them). */
  consumer: string;
  jobs: Map<string, Record<string, string>>;
  /** Job ids by their hash's `state`. */
  byState: Map<string, string[]>;
  active: ActiveJob[];
  /** Waiting stream jobs: [entry id, job id]. */
  streamEntries: [string, string][];
  wakeIds: string[];
  schedulers: [string, string][];
  dedupIds: string[];
  groups: string[];
  subscriptions: SubscriptionFacts[];
  /** Every message id of the broadcast stream. */
  messages: string[];
  /** Consumer of the broadcast subscriptions' pending entries. */
  bcConsumer: string;
  /** Problems met while building (a step that did not reach its state): reported, not fatal. */
  warnings: string[];
}

async function until(what: string, check: () => boolean, warnings: string[]): Promise<void> {
  const deadline = Date.now() + BUILD_WAIT_MS;
  while (!check()) {
    if (Date.now() > deadline) {
      warnings.push(`state build: ${what} not reached in ${BUILD_WAIT_MS} ms`);
      return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

const never = new Promise<never>(() => undefined);

/**
 * Builds the state on an empty database. Jobs a worker holds are left active by closing the worker
 * with force while their processors never return: exactly what a crashed or killed worker leaves.
 */
export async function buildFuzzState(url: string, variant: Variant): Promise<Facts> {
  const warnings: string[] = [];
  const queue = new Queue(FUZZ_QUEUE, { connection: url });
  queue.on('error', () => undefined);
  try {
    await processSome(queue, url, warnings);
    await addWaiting(queue);
    await queue.upsertScheduler('hourly', { every: HOUR }, { name: 'tick', data: { from: 'scheduler' } });
    await queue.upsertScheduler('nightly', { pattern: '0 3 * * *', tz: 'UTC' }, { name: 'nightly', opts: { priority: 3 } });
    await broadcastState(url, warnings);
    if (variant.globalConcurrency > 0) await queue.setGlobalConcurrency(variant.globalConcurrency);
    if (variant.paused) await queue.pause();
  } finally {
    await queue.close();
  }
  const raw = new Redis(url);
  try {
    await quiet(raw, warnings);
    return { ...(await readFacts(raw, variant)), warnings };
  } finally {
    raw.disconnect();
  }
}

/**
 * Waits until nothing writes any more: a call of a closed worker still on its way must not land
 * after the snapshot every fuzz call starts from (the server's write count stays put for a while).
 */
async function quiet(raw: Redis, warnings: string[]): Promise<void> {
  const deadline = Date.now() + 3000;
  let last = writeCount(await raw.info('persistence'));
  for (let still = 0; still < 3; ) {
    await new Promise((r) => setTimeout(r, 30));
    const now = writeCount(await raw.info('persistence'));
    still = now === last ? still + 1 : 0;
    last = now;
    if (Date.now() > deadline) {
      warnings.push('state build: the keyspace was still being written 3 s after the build');
      return;
    }
  }
}

/** A worker completes some jobs, fails some, retries one, parks a step job and holds the rest. */
async function processSome(queue: Queue, url: string, warnings: string[]): Promise<void> {
  await queue.addBulk([
    { name: 'ok', data: { n: 1 } },
    { name: 'ok', data: { n: 2 }, opts: { removeOnComplete: { count: 10 } } },
    { name: 'fail', data: {} },
    { name: 'fail', data: {}, opts: { removeOnFail: { age: LONG / 1000 } } },
    { name: 'retry', data: {}, opts: { attempts: 3, backoff: LONG } },
    { name: 'step', data: { step: 0 } },
    { name: 'hold', data: { kind: 'stream' } },
    { name: 'hold', data: { kind: 'stream' }, opts: { jobId: 'held-custom' } },
    { name: 'hold', data: { kind: 'priority' }, opts: { priority: 1 } },
    { name: 'hold', data: { kind: 'priority' }, opts: { priority: 4 } },
    { name: 'hold', data: { kind: 'lifo' }, opts: { lifo: true } },
    { name: 'hold', data: { kind: 'group' }, opts: { group: { id: 'g1', maxConcurrency: 1 } } },
  ]);
  let held = 0;
  let settled = 0;
  const worker = new Worker(
    FUZZ_QUEUE,
    async (job: Job) => {
      switch (job.name) {
        case 'ok':
          return { done: true };
        case 'fail':
        case 'retry':
          throw new Error(`${job.name} on purpose`);
        case 'step':
          await job.moveToDelayed(Date.now() + LONG, 1);
          return undefined;
        default:
          await job.updateProgress({ pct: 50 });
          await job.log('half way');
          held++;
          return never;
      }
    },
    { connection: url, concurrency: 12, lockDuration: LONG, stalledInterval: LONG, blockTimeout: 200 },
  );
  worker.on('error', () => undefined);
  for (const ev of ['completed', 'failed', 'moved']) worker.on(ev, () => settled++);
  try {
    await until('6 held and 6 finished jobs', () => held >= 6 && settled >= 6, warnings);
  } finally {
    await worker.close(true);
  }
}

/** Jobs of every kind that wait: stream, custom id, delayed, due, priority, LIFO, groups, dedup. */
async function addWaiting(queue: Queue): Promise<void> {
  await queue.add('wait', { step: 0 });
  await queue.add('wait', 'not an object');
  await queue.add('wait', {}, { jobId: 'custom-a', attempts: 2 });
  await queue.add('later', {}, { delay: HOUR });
  await queue.add('later', {}, { delay: HOUR, lifo: true });
  // Due almost at once and never promoted (no worker runs): promote finds work.
  await queue.add('due', {}, { delay: 1 });
  await queue.add('urgent', {}, { priority: 2 });
  await queue.add('urgent', {}, { priority: 7 });
  await queue.add('stack', {}, { lifo: true });
  await queue.add('stack', {}, { lifo: true });
  await queue.add('grouped', {}, { group: { id: 'g1' } });
  await queue.add('grouped', {}, { group: { id: 'g1' } });
  await queue.add('grouped', {}, { group: { id: 'g2', ordered: true, rateMax: 2, rateDuration: 60_000 } });
  await queue.add('grouped', {}, { group: { id: 'g2' } });
  await queue.add('grouped', {}, { group: { id: 'g3', tokenBucket: { capacity: 2, refillRate: 0.5 } } });
  await queue.add('dedup', {}, { dedup: { id: 'd-simple' } });
  await queue.add('dedup', {}, { dedup: { id: 'd-throttle', ttl: HOUR } });
  await queue.add('dedup', {}, { delay: HOUR, dedup: { id: 'd-debounce', mode: 'debounce' } });
  await new Promise((r) => setTimeout(r, 5)); // the 1 ms delay is over
}

/** Two subscriptions: subA retries (attempts 3), subB gives up at once; each holds one message. */
async function broadcastState(url: string, warnings: string[]): Promise<void> {
  const b = new Broadcast(FUZZ_BROADCAST, { connection: url, maxMessages: 100 });
  const done = new Map<string, number>();
  let held = 0;
  const workers = SUBSCRIPTIONS.map((sub, i) => {
    const w = new BroadcastWorker(
      FUZZ_BROADCAST,
      sub,
      async (m) => {
        if (m.subject.startsWith('fail.')) throw new Error('message failed on purpose');
        if (m.subject.startsWith('hold.')) {
          held++;
          return never;
        }
        return { ok: true };
      },
      { connection: url, concurrency: 4, startFrom: 'earliest', attempts: i === 0 ? 3 : 1, backoff: LONG, lockDuration: LONG, stalledInterval: LONG, blockTimeout: 200 },
    );
    w.on('error', () => undefined);
    for (const ev of ['completed', 'failed']) w.on(ev, () => done.set(sub, (done.get(sub) ?? 0) + 1));
    return w;
  });
  try {
    await Promise.all(workers.map((w) => w.run()));
    for (const subject of ['ok.1', 'fail.1', 'hold.1', 'ok.2']) await b.publish(subject, { subject });
    await until('broadcast messages settled', () => held >= 2 && SUBSCRIPTIONS.every((s) => (done.get(s) ?? 0) >= 3), warnings);
    await Promise.all(workers.map((w) => w.close(true)));
    // Published after the workers left: read by nobody yet.
    for (const subject of ['later.1', 'later.2']) await b.publish(subject, { subject });
  } finally {
    await Promise.all(workers.map((w) => w.close(true)));
    await b.close();
  }
}

async function scanAll(raw: Redis, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await raw.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    out.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return out.sort();
}

/** Reads what the argument generator needs from the built keyspace. */
async function readFacts(raw: Redis, variant: Variant): Promise<Omit<Facts, 'warnings'>> {
  const queue = new QueueKeys(FUZZ_QUEUE);
  const broadcast = new BroadcastKeys(FUZZ_BROADCAST);
  const jobs = new Map<string, Record<string, string>>();
  for (const key of await scanAll(raw, queue.jobPattern)) {
    const id = key.slice(queue.jobPrefix.length);
    if (id.includes(':')) continue; // job:<id>:logs
    jobs.set(id, await raw.hgetall(key));
  }
  const byState = new Map<string, string[]>();
  const active: ActiveJob[] = [];
  const streamEntries: [string, string][] = [];
  for (const [id, h] of jobs) {
    const state = h.state ?? 'none';
    byState.set(state, [...(byState.get(state) ?? []), id]);
    if (state === 'active') active.push({ id, fence: h.fence ?? '', owner: h.owner ?? '', src: h.src ?? '' });
    if (state === 'waiting' && h.sid) streamEntries.push([h.sid, id]);
  }
  const wakeIds = ((await raw.xrange(queue.wake, '-', '+')) as [string, string[]][]).map((e) => e[0]);
  const schedulers = Object.entries(await raw.hgetall(queue.schedulers)).sort();
  const dedupIds = Object.keys(await raw.hgetall(queue.dedup)).sort();
  const messages = ((await raw.xrange(broadcast.stream, '-', '+')) as [string, string[]][]).map((e) => e[0]);
  const subscriptions: SubscriptionFacts[] = [];
  let bcConsumer = '';
  for (const name of SUBSCRIPTIONS) {
    const state = await raw.hgetall(broadcast.sub(name));
    const pend = (await raw.call('XPENDING', broadcast.stream, name, '-', '+', 100).catch(() => [])) as [string, string, number, number][];
    const pending = pend.map(([id, consumer]) => ({ id, consumer, fence: state[`n:${id}`] ?? '' }));
    bcConsumer ||= pending[0]?.consumer ?? '';
    subscriptions.push({ name, pending, retrying: await raw.zrange(broadcast.retry(name), '0', '-1') });
  }
  return {
    queue,
    broadcast,
    variant,
    consumer: active[0]?.owner ?? 'fz-no-consumer',
    jobs,
    byState,
    active,
    streamEntries,
    wakeIds,
    schedulers,
    dedupIds,
    groups: ['g1', 'g2', 'g3'],
    subscriptions,
    messages,
    bcConsumer: bcConsumer || 'fz-no-bc-consumer',
  };
}
