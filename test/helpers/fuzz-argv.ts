/**
 * A valid argument list for each library function, as its caller in src/engine builds it, filled
 * with ids, fences, consumers and entry ids of the fuzz keyspace (fuzz-state.ts). The fuzz mutates
 * these, so its calls reach past the first checks into the code that writes.
 *
 * Layouts are the ones without a caller clock (the server's TIME decides, issue 15): no function
 * takes a `now` argument, and the lua/*.lua headers give each argument. A function with no entry
 * here (a new one) is still fuzzed, from an empty list: add its entry to reach deeper. An entry that
 * no longer matches its function still fuzzes it, shallowly: the 'valid' calls of the report then
 * show the refusals.
 */
import type { Prng } from './prng.js';
import { MISSING_ID, type ActiveJob, type Facts } from './fuzz-state.js';

export type Template = (f: Facts, rng: Prng) => string[];

const HOUR = 3_600_000;

function pick<T>(rng: Prng, items: readonly T[], fallback: T): T {
  return items.length > 0 ? rng.pick(items) : fallback;
}

/** Some of `items` (in their order), at least `min` when there are that many. */
function some<T>(rng: Prng, items: readonly T[], min = 1): T[] {
  const chosen = items.filter(() => rng.chance(0.5));
  for (const item of items) {
    if (chosen.length >= min) break;
    if (!chosen.includes(item)) chosen.push(item);
  }
  return chosen;
}

const NO_JOB: ActiveJob = { id: MISSING_ID, fence: '1', owner: 'fz-nobody', src: 's' };

function activeJob(f: Facts, rng: Prng, src?: string): ActiveJob {
  const all = src ? f.active.filter((j) => j.src === src) : f.active;
  return pick(rng, all.length > 0 ? all : f.active, NO_JOB);
}

/** Any job id of the keyspace, or now and then one that does not exist. */
export function anyJobId(f: Facts, rng: Prng): string {
  if (rng.chance(0.1)) return MISSING_ID;
  return pick(rng, [...f.jobs.keys()], MISSING_ID);
}

/** A job id and fence for a progress/log/data write: the running worker's claim, or a handle's '' on any job. */
function writer(f: Facts, rng: Prng): [string, string] {
  if (rng.chance(0.5)) {
    const j = activeJob(f, rng);
    return [j.id, j.fence];
  }
  return [anyJobId(f, rng), ''];
}

/** A job id in `state` (the job-edit functions' own case), or now and then any id. */
function idIn(f: Facts, rng: Prng, state: string): string {
  const ids = f.byState.get(state) ?? [];
  if (ids.length === 0 || rng.chance(0.2)) return anyJobId(f, rng);
  return rng.pick(ids);
}

/** One 12-field job group of glidemq_add, of a kind drawn at random. */
function addGroup(f: Facts, rng: Prng): string[] {
  const g = ['', 'fz-add', '{"n":1}', '0', '0', '0', '1', '', '', '0', '', ''];
  switch (rng.int(0, 10)) {
    case 1: g[3] = String(HOUR); break; // delayed
    case 2: g[4] = String(rng.int(1, 2097152)); break; // prioritized
    case 3: g[5] = '1'; break; // LIFO
    case 4: g[11] = JSON.stringify({ id: rng.pick(f.groups), maxConcurrency: 2 }); break;
    case 5: [g[8], g[9], g[10]] = [pick(rng, f.dedupIds, 'd-new'), '0', 'simple']; break;
    case 6: [g[8], g[9], g[10]] = ['d-throttle', String(HOUR), 'throttle']; break;
    case 7: [g[3], g[8], g[9], g[10]] = [String(HOUR), 'd-debounce', '0', 'debounce']; break;
    case 8: g[0] = rng.chance(0.5) ? anyJobId(f, rng) : `fz-custom-${rng.int(1, 99)}`; break;
    case 9: [g[6], g[7]] = ['3', '{"backoff":{"type":"fixed","delay":1000},"removeOnComplete":true}']; break;
    case 10: [g[8], g[9], g[10]] = [pick(rng, f.dedupIds, 'd-extend'), String(HOUR), 'extend']; break; // BullMQ's {ttl, extend}
  }
  return g;
}

function finishGroup(rng: Prng, j: ActiveJob): string[] {
  const completed = rng.chance(0.5);
  return [
    // a failure carries its stack half the time (lua/finish.lua: 'failed:<stack>')
    j.id, j.fence, completed ? 'completed' : rng.pick(['failed', 'failed:Error: boom\n    at f (x.js:1:1)']), completed ? '{"r":1}' : 'boom',
    rng.pick(['-1', '0', '1000']), rng.pick(['', '0', 'count:10', 'age:60000', 'agecount:60000:10']), String(rng.int(0, 500)),
  ];
}

function scheduler(f: Facts, rng: Prng): { name: string; rec: Record<string, unknown> } {
  const [name, text] = pick(rng, f.schedulers, ['fz-none', '{}']);
  return { name, rec: JSON.parse(text) as Record<string, unknown> };
}

function subscription(f: Facts, rng: Prng) {
  return pick(rng, f.subscriptions, { name: 'subA', pending: [], retrying: [] });
}

export const TEMPLATES: Record<string, Template> = {
  glidemq_version: () => [],
  glidemq_add: (f, rng) => {
    const groups = Array.from({ length: rng.int(1, 3) }, () => addGroup(f, rng));
    // half the calls name a producer, some of them repeating a call number already run
    const producer = rng.chance(0.5) ? ['fz-producer', String(rng.int(1, 4)), '1'] : ['', '0', '0'];
    return ['524288', ...producer, String(groups.length), ...groups.flat()];
  },
  glidemq_addData: (_f, rng) => {
    const datas = Array.from({ length: rng.int(0, 3) }, (_, i) => `{"n":${i}}`);
    // the shared options: plain, delayed, prioritized, LIFO, or with attempts and stored options
    const shared = rng.pick([
      ['0', '0', '0', '1', ''],
      [String(HOUR), '0', '0', '1', ''],
      ['0', String(rng.int(1, 2097152)), '0', '1', ''],
      ['0', '0', '1', '1', ''],
      ['0', '0', '0', '3', '{"backoff":{"type":"fixed","delay":1000},"removeOnComplete":true}'],
    ]);
    // a producer of its own: a call number is one function's (glidemq_add's template has its own)
    const producer = rng.chance(0.5) ? ['fz-producer-data', String(rng.int(1, 4)), '1'] : ['', '0', '0'];
    return ['524288', ...producer, 'fz-add', ...shared, String(datas.length), ...datas];
  },
  glidemq_upsertScheduler: (f, rng) => {
    const { name, rec } = scheduler(f, rng);
    const target = rng.chance(0.3) ? 'fz-new-scheduler' : name;
    const start = rng.chance(0.3) ? { startDate: rng.pick([0, Date.now() + HOUR]) } : {}; // an interval's first run
    return [target, JSON.stringify({ ...rec, name: target, ...start })];
  },
  glidemq_removeScheduler: (f, rng) => [rng.chance(0.8) ? scheduler(f, rng).name : 'fz-none'],
  glidemq_fireSchedulers: (f, rng) =>
    some(rng, f.schedulers).flatMap(([name, text]) => {
      const next = Number((JSON.parse(text) as { nextRun: number }).nextRun);
      return [name, String(next), String(next + HOUR)];
    }),
  glidemq_getMetrics: (_f, rng) =>
    rng.chance(0.5) ? ['', '', String(rng.int(1, 1440))] : [String(Date.now() - HOUR), String(Date.now() + 60_000), '60'],
  glidemq_fetch: (f, rng) => [rng.chance(0.7) ? f.consumer : 'fz-consumer-2', String(rng.int(0, 3)), rng.pick(['0', '30000']), '1'],
  glidemq_activate: (f, rng) => {
    const entries = some(rng, f.streamEntries, 0);
    const wakes = some(rng, f.wakeIds, 0);
    return [f.consumer, String(rng.int(1, 4)), rng.pick(['0', '30000']), '1', wakes.join(','), String(entries.length), ...entries.flat()];
  },
  glidemq_finish: (f, rng) => {
    const [id, fence, outcome, value, retryDelay, keep, durationMs] = finishGroup(rng, activeJob(f, rng));
    return [id, fence, f.consumer, outcome, value, retryDelay, String(rng.int(0, 2)), keep, durationMs, rng.pick(['0', '1']), rng.pick(['0', '30000']), '1'];
  },
  glidemq_finishMany: (f, rng) => {
    const jobs = some(rng, f.active, 2);
    const started = some(rng, f.active, 0).flatMap((j) => [j.id, j.fence]).join(' ');
    return [f.consumer, String(jobs.length), String(rng.int(0, 2)), rng.pick(['0', '1']), started, rng.pick(['0', '30000']), '1',
      ...jobs.flatMap((j) => finishGroup(rng, j))];
  },
  glidemq_promote: () => ['1000'],
  glidemq_moveToDelayed: (f, rng) => {
    const j = activeJob(f, rng);
    const [timing, ms] = rng.pick([['at', Date.now() + HOUR], ['at', Date.now() - 1000], ['in', HOUR], ['in', 0]] as const);
    return [j.id, j.fence, f.consumer, timing, String(ms), rng.pick(['', '2', '{"at":"b"}'])];
  },
  glidemq_pause: () => [],
  glidemq_resume: () => [],
  glidemq_rateLimit: (_f, rng) => [String(rng.pick([0, 1, 1000, HOUR]))],
  glidemq_updateProgress: (f, rng) => {
    const [id, fence] = writer(f, rng);
    return [id, fence, '{"pct":75}'];
  },
  glidemq_addLog: (f, rng) => {
    const [id, fence] = writer(f, rng);
    return [id, fence, 'a log line', String(rng.int(0, 1000))];
  },
  glidemq_updateData: (f, rng) => {
    const [id, fence] = writer(f, rng);
    return [id, fence, rng.pick(['{"n":2}', '[1,2]', '"text"']), rng.pick(['524288', '0', '4'])];
  },
  glidemq_clearLogs: (f, rng) => {
    const [id, fence] = writer(f, rng);
    return [id, fence, String(rng.int(0, 3))];
  },
  glidemq_retryJob: (f, rng) => {
    const state = rng.pick(['failed', 'completed']);
    return [idIn(f, rng, state), state, rng.pick(['0', '1']), rng.pick(['0', '1'])];
  },
  glidemq_retryJobs: (_f, rng) => [rng.pick(['failed', 'completed']), String(rng.int(1, 20)), rng.pick(['', '0', String(Date.now() + HOUR)])],
  glidemq_promoteJob: (f, rng) => [idIn(f, rng, 'delayed')],
  glidemq_promoteJobs: (_f, rng) => [String(rng.int(1, 20))],
  glidemq_changeDelay: (f, rng) => [idIn(f, rng, 'delayed'), String(rng.pick([0, 1000, HOUR]))],
  glidemq_changePriority: (f, rng) => {
    const [priority, lifo] = rng.pick([['0', '0'], ['0', '1'], ['5', '0'], ['2097152', '0']] as const);
    return [idIn(f, rng, rng.pick(['waiting', 'prioritized', 'delayed', 'active'])), priority, lifo];
  },
  glidemq_extendLocks: (f, rng) => [f.consumer, ...some(rng, f.active).flatMap((j) => [j.id, j.fence])],
  glidemq_extendLock: (f, rng) => {
    const j = activeJob(f, rng);
    return [j.id, j.fence, rng.chance(0.8) ? f.consumer : 'fz-token', String(rng.pick([1, 1000, HOUR])), '1'];
  },
  glidemq_getCounts: () => [],
  glidemq_listJobs: (f, rng) => {
    const groups = some(rng, [...f.groups, 'g9'], 0);
    const states = some(rng, ['waiting', 'paused', 'active', 'delayed', 'prioritized', 'completed', 'failed']);
    return [String(rng.pick([0, -5, 2])), String(rng.pick([-1, 3, 100])), rng.pick(['0', '1']), states.join(','), String(groups.length), ...groups];
  },
  glidemq_listenEvents: (_f, rng) => [String(rng.pick([1000, 30_000, 86_400_000]))],
  glidemq_removeJob: (f, rng) => [anyJobId(f, rng), rng.pick(['0', '1']), rng.pick(['0', '1'])],
  glidemq_parentRemoved: (f, rng) => ['1', anyJobId(f, rng), f.queue.job(anyJobId(f, rng)), rng.pick(['remove', 'unlink'])],
  glidemq_revoke: (f, rng) => [anyJobId(f, rng), rng.pick(['0', '1'])],
  glidemq_removeDedupKeyOf: (f, rng) => [pick(rng, f.dedupIds, 'd-none'), anyJobId(f, rng)],
  glidemq_drain: (f, rng) => {
    const groups = some(rng, [...f.groups, 'g9'], 0);
    return [rng.pick(['0', '1']), String(rng.int(1, 1000)), rng.pick(['0', '1']), String(groups.length), ...groups];
  },
  glidemq_clean: (_f, rng) => [rng.pick(['completed', 'failed']), String(rng.pick([0, 60_000])), String(rng.int(1, 1000)), rng.pick(['0', '1']), String(rng.pick([0, 5]))],
  glidemq_cleanJobs: (f, rng) => {
    const state = rng.pick(['wait', 'paused', 'delayed', 'prioritized']);
    const ids = [...new Set([...some(rng, [...f.jobs.keys()], 0), anyJobId(f, rng), idIn(f, rng, state === 'wait' ? 'waiting' : state)])];
    return [state, String(rng.pick([0, 60_000])), String(rng.int(1, 1000)), rng.pick(['0', '1']), String(ids.length), ...ids];
  },
  glidemq_removeIdleConsumer: (f, rng) => [rng.chance(0.5) ? f.consumer : 'fz-idle'],
  glidemq_registerWorker: (f, rng) => [
    rng.chance(0.7) ? f.consumer : 'fz-worker-2',
    rng.pick(['{"host":"h","pid":1,"queue":"q","concurrency":2,"running":0,"version":"0"}', '{}', '{"startedAt":"x"}']),
    String(rng.pick([30, 1000, 30_000])),
  ],
  glidemq_unregisterWorker: (f, rng) => [rng.chance(0.5) ? f.consumer : 'fz-worker-2'],
  glidemq_requestWorker: (f, rng) => [rng.chance(0.7) ? f.consumer : 'fz-worker-2', rng.pick(['quiet', 'stop'])],
  glidemq_searchJobs: (_f, rng) => [rng.pick(['waiting', 'paused', 'active', 'delayed', 'failed', 'completed']), rng.pick(['a', '{', 'x'.repeat(50)]), '0', String(rng.int(1, 1000))],
  glidemq_listWorkers: () => [],
  glidemq_oldestWaiting: () => [],
  glidemq_upkeep: () => [],
  glidemq_release: (f, rng) => [f.consumer, ...some(rng, f.active).flatMap((j) => [j.id, j.fence])],
  glidemq_removeStaleConsumers: (f, rng) => [rng.pick(['', f.consumer]), String(rng.pick([0, 60_000])), rng.pick(['0', '1'])],
  glidemq_reclaimStalled: (f, rng) => [
    rng.chance(0.5) ? f.consumer : 'fz-reclaimer', rng.pick(['0', '30000']), '1', '60000', rng.pick(['0', '1']), '0-0', rng.pick(['', '0', 'count:1']),
  ],
  glidemq_reclaimStalledListJobs: (_f, rng) => [rng.pick(['0', '30000']), rng.pick(['0', '1']), rng.pick(['0', '1']), rng.pick(['', '0', 'count:1'])],
  glidemq_healListActive: (_f, rng) => [rng.pick(['0', '1']), String(rng.int(1, 500))],
  glidemq_ownClaims: (f, rng) => [rng.chance(0.8) ? f.consumer : 'fz-consumer-2', String(rng.int(1, 100))],
  glidemq_adopt: (f, rng) => {
    const jobs = some(rng, f.active, 1);
    return [rng.chance(0.8) ? f.consumer : 'fz-consumer-2', String(jobs.length), ...jobs.flatMap((j) => [j.id, rng.chance(0.8) ? j.fence : '99'])];
  },
  glidemq_listClaims: (_f, rng) => [rng.pick(['0', '1000']), String(rng.int(1, 1000))],
  glidemq_bcPublish: (_f, rng) => {
    // half the calls name a producer, some of them repeating a call number already run
    const producer = rng.chance(0.5) ? ['fz-producer', String(rng.int(1, 4)), '1'] : ['', '0', '0'];
    return [rng.pick(['0', '100']), ...producer, rng.pick(['orders.new', 'hold.2']), '{"a":1}'];
  },
  glidemq_bcSubscriptions: () => [],
  glidemq_bcSubscribe: (f, rng) => [
    rng.chance(0.6) ? subscription(f, rng).name : 'subC', rng.pick(['$', '0', pick(rng, f.messages, '0-1')]), '["orders.*"]',
  ],
  glidemq_bcActivate: (f, rng) => {
    const s = subscription(f, rng);
    const run = some(rng, s.pending.map((p) => p.id), 0);
    const skip = some(rng, f.messages, 0).filter((id) => !run.includes(id));
    const entries = [...run.map((id) => [id, '1']), ...skip.map((id) => [id, '0'])];
    return [s.name, f.bcConsumer, rng.pick(['0', '30000']), '1', String(entries.length), ...entries.flat()];
  },
  glidemq_bcFinish: (f, rng) => {
    const s = subscription(f, rng);
    const p = pick(rng, s.pending, { id: pick(rng, f.messages, '0-1'), consumer: f.bcConsumer, fence: '1' });
    const completed = rng.chance(0.5);
    return [s.name, f.bcConsumer, p.id, p.fence, completed ? 'completed' : 'failed', completed ? '' : 'boom', rng.pick(['-1', '1000']), '3'];
  },
  glidemq_bcRetries: (f, rng) => [subscription(f, rng).name, f.bcConsumer, String(rng.int(0, 5)), rng.pick(['0', '30000']), '1'],
  glidemq_bcReclaim: (f, rng) => [subscription(f, rng).name, f.bcConsumer, rng.pick(['0', '30000']), '1', String(rng.int(0, 5))],
  glidemq_bcExtend: (f, rng) => {
    const s = subscription(f, rng);
    const claims = some(rng, s.pending);
    return [s.name, f.bcConsumer, String(claims.length), ...claims.flatMap((p) => [p.id, p.fence])];
  },
  glidemq_bcRemoveIdleConsumer: (f, rng) => [subscription(f, rng).name, rng.chance(0.5) ? f.bcConsumer : 'fz-idle'],
  // flows (lua/flow.lua): a parent and a child of this queue, or a child of an existing job
  glidemq_addFlow: (f, rng) => {
    const n = rng.int(1, 4);
    const [p, c] = [`fz-flow-p${n}`, `fz-flow-c${n}`];
    const node = (id: string, parents: string, deps: string) => ['1', id, 'fz-flow', '{"n":1}', '0', '0', '0', '1', '', '', parents, deps];
    const producer = rng.chance(0.5) ? ['fz-producer-flow', String(rng.int(1, 4)), '1'] : ['', '0', '0'];
    if (rng.chance(0.3)) return ['524288', ...producer, '1', ...node(c, f.queue.job(anyJobId(f, rng)), '')];
    return ['524288', ...producer, '2', ...node(p, '', f.queue.job(c)), ...node(c, f.queue.job(p), '')];
  },
  glidemq_settle: (f, rng) => ['1', anyJobId(f, rng), f.queue.job(anyJobId(f, rng)), rng.pick(['completed', 'fail', 'ignore', 'remove', 'continue']), '{"r":1}'],
  glidemq_outboxDone: (f, rng) => ['1', `${f.queue.job(anyJobId(f, rng))} ${f.queue.job(anyJobId(f, rng))}`, '{}'],
  glidemq_outboxList: (_f, rng) => [rng.pick(['0', '5000']), String(rng.int(1, 100))],
  glidemq_moveToWaitingChildren: (f, rng) => {
    const j = activeJob(f, rng);
    return [j.id, rng.chance(0.8) ? j.fence : '99', rng.chance(0.8) ? f.consumer : 'fz-other', rng.pick(['', f.queue.job(anyJobId(f, rng))])];
  },
  glidemq_removeChildDependency: (f, rng) => [anyJobId(f, rng)],
  glidemq_releaseParents: (_f, rng) => [rng.pick(['0', '1']), rng.pick(['0', '5000']), String(rng.pick([0, 2])), String(rng.int(1, 100))],
  // a flow stored in parts across slots (lua/flow-parts.lua): a part with a child in another slot, a journal, links
  glidemq_addFlowPart: (f, rng) => {
    const n = rng.int(1, 4);
    const [p, c] = [`fz-part-p${n}`, `fz-part-c${n}`];
    const node = (id: string, parents: string, deps: string) => ['1', id, 'fz-part', '{"n":1}', '0', '0', '0', '1', '', '', parents, deps];
    const producer = rng.chance(0.5) ? ['fz-producer-part', String(rng.int(1, 4)), '1'] : ['', '0', '0'];
    const journal = rng.pick(['', '{"parts":[]}']);
    const links = rng.chance(0.3) ? `${f.queue.job(anyJobId(f, rng))} ${f.queue.job(c)}` : '';
    const elsewhere = 'glide:{fz-elsewhere}:job:o1';
    return ['524288', ...producer, f.queue.job(p), journal, links, '2', ...node(p, '', `${f.queue.job(c)} ${elsewhere}`), ...node(c, f.queue.job(p), '')];
  },
  glidemq_flowJournalDone: (f, rng) => [f.queue.job(`fz-part-p${rng.int(1, 4)}`)],
  glidemq_flowJournalDue: (_f, rng) => [rng.pick(['0', '5000']), String(rng.int(1, 100))],
  glidemq_restore: (f, rng) => {
    const state = rng.pick(['waiting', 'prioritized', 'delayed', 'completed', 'failed', 'waiting-children']);
    const finished = state === 'completed' || state === 'failed';
    const id = rng.chance(0.3) ? anyJobId(f, rng) : `fz-restored-${rng.int(1, 50)}`;
    const value = state === 'completed' ? '{"ok":1}' : state === 'failed' ? 'boom' : '';
    // a parent waits for a child (which may be a job of the queue), a child names a parent
    const flow = state === 'waiting-children' ? JSON.stringify({ deps: [f.queue.job(anyJobId(f, rng))] }) : rng.pick(['', JSON.stringify({ parents: [f.queue.job(`fz-restored-${rng.int(1, 50)}`)] })]);
    const dedup = rng.chance(0.3) ? [`fz-dedup-${rng.int(1, 5)}`, rng.pick(['simple', 'throttle']), '60000'] : ['', '', '0'];
    return ['1', id, state, 'n', '{}', state === 'delayed' ? String(Date.now() + HOUR) : '0', state === 'prioritized' ? '3' : '0',
      '2', '1', '', value, finished ? '["at x"]' : '', '0', finished ? String(Date.now()) : '0', rng.pick(['', '["a","b"]']), flow, ...dedup];
  },
};

/** Functions whose KEYS[1] is a broadcast's meta key (lua/broadcast.lua), not a queue's. */
export function isBroadcastFunction(fn: string): boolean {
  return fn.startsWith('glidemq_bc');
}

export function validArgv(fn: string, f: Facts, rng: Prng): string[] {
  return TEMPLATES[fn]?.(f, rng) ?? [];
}
