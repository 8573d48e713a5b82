/**
 * Clock skew (issue 15, part 1): every decision that compares times must use the server's TIME.
 * Worker and producer processes whose Date.now() is 5 minutes ahead ('plus', 'doomed') or behind
 * ('minus') run next to a correct one ('correct'), all on one real valkey-server. What each
 * processor run did is traced with server time (see test/fixtures/skew-worker.ts), so every
 * expectation below is stated on the one clock all processes share.
 * Locks are short (LOCK_MS) and the stalled checker runs often, so a wrong lock-age comparison
 * shows within a second; the waits are safety nets, after which the checks say what went wrong.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue, type JobOptions } from '../../src/index.js';
import { uniqueQueue } from '../helpers/engine.js';
import { readTrace, serverNow, SkewAgent, type TaskData, type TraceEntry, type WorkSettings } from '../helpers/skew-agent.js';
import { useServer, waitFor } from '../helpers/valkey.js';

const SKEW_MS = 5 * 60_000;
const LOCK_MS = 1000;
/** Runs twice the lock: only heartbeats keep these claims, so a wrong lock age reclaims them. */
const HOLD_MS = 2 * LOCK_MS;
const DELAY_MS = 2000;
const PROMOTION_MS = 100;
/** A delay is honoured within the promotion tick: a due job may start this much early... */
const EARLY_MS = PROMOTION_MS;
/** ...or this much late (one tick plus scheduling noise on a busy 2-core runner). */
const LATE_MS = 1000;
/** Server times are read with ms resolution on either side of a span: a span can read 1 ms short. */
const ROUNDING_MS = 2;

const settings = (concurrency: number): WorkSettings => ({
  concurrency,
  lockDuration: LOCK_MS,
  stalledInterval: 200, // the stalled checker runs five times per lock: a wrong lock age shows at once
  promotionInterval: PROMOTION_MS,
});

describe('clock skew: the server clock decides every time comparison', function () {
  this.timeout(30_000);
  let agents: SkewAgent[] = [];
  let plus: SkewAgent;
  let minus: SkewAgent;
  let correct: SkewAgent;
  let doomed: SkewAgent;
  let client: Redis;
  const queues: Queue[] = [];

  // registered before useServer's hooks, so the agents end (by pid) before the server they use
  after(async () => {
    await Promise.all(agents.map((a) => a.kill()));
    client?.disconnect();
  });
  const server = useServer();
  before(async function () {
    this.timeout(30_000);
    const url = server().url;
    // all spawned before any is awaited, so the after hook ends every one even if one fails to start
    agents = [
      new SkewAgent('plus', url, SKEW_MS),
      new SkewAgent('minus', url, -SKEW_MS),
      new SkewAgent('correct', url, 0),
      new SkewAgent('doomed', url, SKEW_MS), // SIGKILLed holding jobs
    ];
    [plus, minus, correct, doomed] = agents;
    await Promise.all(agents.map((a) => a.waitReady()));
    client = server().client();
  });
  afterEach(async () => {
    await Promise.all(agents.map((a) => a.stopAll()));
    await Promise.all(queues.splice(0).map((q) => q.close()));
  });

  function queue(label: string): Queue {
    const q = new Queue(uniqueQueue(label), { connection: server().url });
    queues.push(q);
    return q;
  }

  /** Waits (a safety net) until every job is completed or failed; the caller's checks then say what went wrong. */
  async function settle(q: Queue, ids: string[], timeoutMs: number): Promise<void> {
    const final = async (id: string) => ['completed', 'failed'].includes((await q.getJob(id))?.state ?? '');
    const done = async () => (await Promise.all(ids.map(final))).every(Boolean);
    await waitFor(done, 'the jobs to finish', timeoutMs, 50).catch(() => undefined);
  }

  async function describeJob(q: Queue, id: string): Promise<string> {
    const j = await q.getJob(id);
    const due = await client.zscore(q.keys.scheduled, id);
    const dueIn = due === null ? '' : `, due in ${Number(due) - (await serverNow(client))} ms`;
    return `${j?.state ?? 'missing'}${j?.state === 'failed' ? ` (${j.failedReason})` : ''}${dueIn}`;
  }

  const runs = (trace: TraceEntry[], id: string, step?: string) => trace.filter((e) => e.kind === 'run' && e.id === id && e.step === step);

  it('each agent reads the clock its preload gives it', async () => {
    const now = await serverNow(client);
    for (const a of [plus, minus, correct, doomed]) {
      // reported at start, a few hundred ms before `now`: far inside 5 minutes either way
      expect(a.reportedNow - now, `${a.label} Date.now()`).to.be.closeTo(a.skewMs, 10_000);
      expect(a.reportedDate - now, `${a.label} new Date()`).to.be.closeTo(a.skewMs, 10_000);
    }
  });

  it('no live job is reclaimed: stream, priority, LIFO, group and step jobs on +5 min, -5 min and correct workers', async () => {
    const q = queue('skew-live');
    const kinds: [string, TaskData, JobOptions][] = [
      ['plain', { hold: HOLD_MS }, {}],
      ['priority', { hold: HOLD_MS }, { priority: 3 }],
      ['lifo', { hold: HOLD_MS }, { lifo: true }],
      ['group', { hold: HOLD_MS }, {}],
      ['step', { hold: HOLD_MS, steps: ['one', 'two'], parkMs: 500 }, { priority: 5 }],
    ];
    const added: { id: string; kind: string; holder: string }[] = [];
    // One agent at a time takes all five kinds (its slots are then full), so each holds every kind
    // while the others' stalled checkers run with their own clocks.
    for (const agent of [plus, minus, correct]) {
      await agent.work(q.name, settings(kinds.length));
      const ids: string[] = [];
      for (const [kind, data, opts] of kinds) {
        const job = await q.add(kind, data, kind === 'group' ? { group: { id: `g-${agent.label}` } } : opts);
        ids.push(job.id);
        added.push({ id: job.id, kind, holder: agent.label });
      }
      await waitFor(async () => {
        const trace = await readTrace(client, q.name);
        return ids.every((id) => trace.some((e) => e.kind === 'run' && e.id === id));
      }, `${agent.label} to start its jobs`);
    }
    await settle(q, added.map((a) => a.id), 20_000);

    const trace = await readTrace(client, q.name);
    const problems: string[] = [];
    for (const { id, kind, holder } of added) {
      const what = `${kind} job ${id} (meant for ${holder})`;
      const state = await describeJob(q, id);
      if (state !== 'completed') problems.push(`${what} ended ${state}`);
      for (const step of kind === 'step' ? ['one', 'two'] : [undefined]) {
        const r = runs(trace, id, step);
        if (r.length !== 1) problems.push(`${what}${step ? ` step ${step}` : ''} ran ${r.length} times: ${r.map((e) => e.by).join(', ')}`);
      }
      const first = runs(trace, id, kind === 'step' ? 'one' : undefined)[0]?.by;
      if (first !== holder) problems.push(`${what} first ran on ${first ?? 'no worker'}`);
      if (kind === 'step') {
        const park = trace.find((e) => e.kind === 'park' && e.id === id);
        const two = runs(trace, id, 'two')[0];
        if (park?.until !== undefined && two && two.at < park.until - EARLY_MS) {
          problems.push(`${what} step two started ${park.until - two.at} ms before the time it was parked until (parked by ${park.by})`);
        }
      }
    }
    expect(problems).to.deep.equal([]);
  });

  it('the jobs of a killed +5 min worker are reclaimed by a correct worker once the lock has run out', async () => {
    const q = queue('skew-killed');
    await doomed.work(q.name, settings(3));
    const data: TaskData = { hangOn: doomed.label };
    const ids: string[] = [];
    for (const opts of [{}, { priority: 2 }, { lifo: true }]) ids.push((await q.add('held', data, opts)).id);
    await waitFor(async () => {
      const trace = await readTrace(client, q.name);
      return ids.every((id) => trace.some((e) => e.id === id && e.by === doomed.label));
    }, 'the doomed worker to hold its jobs');
    await doomed.kill();
    const killedAt = await serverNow(client);
    await correct.work(q.name, settings(3));
    await settle(q, ids, 10 * LOCK_MS);

    const trace = await readTrace(client, q.name);
    const problems: string[] = [];
    for (const id of ids) {
      const state = await describeJob(q, id);
      if (state !== 'completed') problems.push(`job ${id} ended ${state}`);
      const again = runs(trace, id).filter((e) => e.by !== doomed.label);
      if (again.length !== 1) problems.push(`job ${id} ran ${again.length} times after the kill`);
      // its last heartbeat was at most half a lock before the kill, so the lock ran out no sooner
      // than half a lock after it
      else if (again[0].at - killedAt < LOCK_MS / 2 - ROUNDING_MS) {
        problems.push(`job ${id} was reclaimed ${again[0].at - killedAt} ms after the kill, before its lock can have run out`);
      }
    }
    expect(problems).to.deep.equal([]);
  });

  it('a delay runs out on the server clock, whoever added the job, parked it or promotes it', async () => {
    // skewed producers, a correct promoter
    const byProducer = queue('skew-delay-add');
    await correct.work(byProducer.name, settings(3));
    // a correct producer, skewed promoters only
    const byPromoter = queue('skew-delay-promote');
    await Promise.all([plus.work(byPromoter.name, settings(1)), minus.work(byPromoter.name, settings(1))]);
    const addDelayed = async (q: Queue, by: SkewAgent, what: string) => {
      return { q, what, ...(await by.add(q.name, 'delayed', {}, { delay: DELAY_MS })) };
    };
    const jobs = await Promise.all([
      ...[plus, minus, correct].map((a) => addDelayed(byProducer, a, `added by ${a.label}`)),
      addDelayed(byPromoter, correct, 'promoted by plus/minus'),
    ]);
    // a step job a +5 min worker parks until a server time DELAY_MS ahead
    const parked = queue('skew-delay-step');
    await plus.work(parked.name, settings(1));
    const step = await parked.add('step', { steps: ['one', 'two'], parkMs: DELAY_MS }, { priority: 1 });
    const idsOf = (q: Queue) => jobs.filter((j) => j.q === q).map((j) => j.id);
    const net = DELAY_MS + 5000;
    await Promise.all([settle(byProducer, idsOf(byProducer), net), settle(byPromoter, idsOf(byPromoter), net), settle(parked, [step.id], net)]);

    const problems: string[] = [];
    const late = (what: string, waited: number) => {
      if (waited < DELAY_MS - EARLY_MS || waited > DELAY_MS + LATE_MS) problems.push(`${what}, due after ${DELAY_MS} ms, ran after ${waited} ms`);
    };
    for (const { q, what, id, at } of jobs) {
      const r = runs(await readTrace(client, q.name), id);
      if (r.length !== 1) problems.push(`job ${id} ${what} ran ${r.length} times, now ${await describeJob(q, id)}`);
      else late(`job ${id} ${what}`, r[0].at - at);
    }
    const trace = await readTrace(client, parked.name);
    const park = trace.find((e) => e.kind === 'park');
    const two = runs(trace, step.id, 'two');
    if (!park || two.length !== 1) {
      problems.push(`step job ${step.id} parked by plus: step two ran ${two.length} times, now ${await describeJob(parked, step.id)}`);
    }
    else late(`step two of job ${step.id} parked by plus`, two[0].at - park.at);
    expect(problems).to.deep.equal([]);
  });

  it('a backoff set by a -5 min worker runs out on the server clock', async () => {
    const q = queue('skew-backoff');
    await minus.work(q.name, settings(1));
    const job = await q.add('retry', { failFirst: true }, { attempts: 2, backoff: DELAY_MS });
    await waitFor(async () => (await q.getJob(job.id))?.state === 'delayed', 'the first attempt to fail into its backoff');
    // a correct worker joins: it promotes with the right clock, whatever the failed attempt wrote
    await correct.work(q.name, settings(1));
    await settle(q, [job.id], DELAY_MS + 5000);

    const r = runs(await readTrace(client, q.name), job.id);
    expect(r.map((e) => [e.attempt, e.by]), `runs; the job is ${await describeJob(q, job.id)}`).to.have.length(2);
    expect(r[0].by).to.equal(minus.label);
    // the first run's start precedes its failure, from which the backoff counts
    const waited = r[1].at - r[0].at;
    expect(waited, 'ms between the failed attempt and the retry').to.be.within(DELAY_MS - EARLY_MS, DELAY_MS + LATE_MS);
    expect(await describeJob(q, job.id)).to.equal('completed');
  });

  it('getMetrics, read with a correct clock, counts the jobs a +5 min worker completed', async () => {
    const q = queue('skew-metrics');
    await plus.work(q.name, settings(5));
    const jobs = await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'm', data: { i } })));
    await settle(q, jobs.map((j) => j.id), 10_000);
    expect(await Promise.all(jobs.map((j) => describeJob(q, j.id)))).to.deep.equal(jobs.map(() => 'completed'));
    const m = await q.getMetrics();
    expect(m.completed, 'completed jobs in the last hour').to.equal(5);
  });

  it('a scheduler keeps firing after a +5 min worker has fired it', async () => {
    const q = queue('skew-sched');
    await q.upsertScheduler('tick', { every: 1000 }, { data: {} }); // 1 s: the shortest interval allowed
    await plus.work(q.name, settings(1));
    await waitFor(async () => (await readTrace(client, q.name)).length >= 1, 'the +5 min worker to fire the scheduler');
    await plus.stop(q.name);
    const handedOver = await serverNow(client);
    await correct.work(q.name, settings(1));
    const fired = async () => (await readTrace(client, q.name)).filter((e) => e.at > handedOver);
    await waitFor(async () => (await fired()).length >= 3, 'three runs after the hand-over', 8000).catch(() => undefined);
    const runsAfter = (await fired()).length;
    const now = await serverNow(client);
    const nextRun = (await q.getScheduler('tick'))?.nextRun ?? NaN;
    expect(runsAfter, `runs in the ${now - handedOver} ms after the hand-over (next run: in ${nextRun - now} ms)`).to.be.at.least(3);
  });
});
