/**
 * One seeded run of the model test: a random sequence of operations on one queue (adds of every
 * kind, bursts of processing, pause/resume, worker SIGKILL, server SIGKILL + restart on its AOF,
 * reclaim and heal calls), the model's own account of every job, and the invariants checked after
 * every step. Each step ends quiescent (no worker running), so the structures can be read whole.
 */
import { Maintenance, DEFAULT_MAINTENANCE } from '../../src/engine/administering/maintenance.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import type { JobOptions } from '../../src/engine/producing/options.js';
import { Prng } from '../helpers/prng.js';
import { waitFor, type TestServer } from '../helpers/valkey.js';
import { processorPath, startWorkerProcess } from '../helpers/worker-spawn.js';
import { BASE_RUNS, invariantProblems, type Mode, type ModelJob } from './invariants.js';

type Op = 'add' | 'burst' | 'pause' | 'resume' | 'kill-worker' | 'kill-server' | 'kill-server-mid-burst' | 'reclaim' | 'heal';

const OP_WEIGHTS: Record<Op, number> = {
  add: 6,
  burst: 4,
  pause: 0.8,
  resume: 1.2,
  'kill-worker': 1.5,
  'kill-server': 0.8,
  'kill-server-mid-burst': 0.8,
  reclaim: 1,
  heal: 0.8,
};
const MODE_WEIGHTS: Record<Mode, number> = { ok: 11, 'fail-once': 4, fail: 2, step: 3 };
type Kind = 'stream' | 'priority' | 'lifo' | 'delayed' | 'group' | 'custom';
const KIND_WEIGHTS: Record<Kind, number> = { stream: 5, priority: 2, lifo: 2, delayed: 2, group: 2, custom: 1 };
export const GROUPS = ['ga', 'gb'];
const GROUP_OPTIONS = { ga: { maxConcurrency: 2 }, gb: { ordered: true } } as const;

/** Short enough for fast steps, long enough that a live worker's heartbeat is never late. */
const FAST = { lockDuration: 1000, stalledInterval: 500, blockTimeout: 500, promotionInterval: 100, maxStalledCount: 1000 };
const STEP_MS = 30_000; // safety net for one step's waits

export interface RunTotals {
  steps: number;
  jobs: number;
  completed: number;
  failed: number;
  workerKills: number;
  serverKills: number;
  lost: number;
}

export function emptyTotals(): RunTotals {
  return { steps: 0, jobs: 0, completed: 0, failed: 0, workerKills: 0, serverKills: 0, lost: 0 };
}

export class ModelRun {
  readonly rng: Prng;
  readonly jobs = new Map<string, ModelJob>();
  readonly history: string[] = [];
  readonly totals: RunTotals = emptyTotals();
  private readonly queue: Queue;
  private paused = false;
  private customIds: string[] = [];
  /** Jobs an in-process worker started and has not finished yet (running, or its result on the way). */
  private readonly held = new Set<string>();
  /** While set, in-process processors wait on it (so a server can be killed under running jobs). */
  private hold: Promise<void> | undefined;
  /** The ordered group's jobs in the order they were added (delayed ones too), and their places. */
  private readonly orderedLine: string[] = [];
  private readonly orderedPlace = new Map<string, number>();
  /** Starts of an ordered group's job before an earlier one had finished, seen by in-process processors. */
  private readonly orderProblems: string[] = [];
  private readonly startedAt = Date.now();

  constructor(
    readonly seed: number,
    private readonly server: () => TestServer,
    readonly queueName: string,
  ) {
    this.rng = new Prng(seed);
    this.queue = new Queue(queueName, { connection: server().url });
    this.queue.on('error', () => undefined);
  }

  async run(steps: number): Promise<RunTotals> {
    try {
      for (let i = 1; i <= steps; i++) {
        const op = this.rng.weighted(OP_WEIGHTS);
        const what = await this.step(op);
        this.history.push(`${i}. ${what}`);
        if (process.env.GLIDEMQ_MODEL_VERBOSE === '1') console.log(`        ${i}. ${what}`);
        this.totals.steps++;
        await this.check(`after step ${i} (${op})`);
      }
      await this.finish();
      return this.totals;
    } finally {
      await this.queue.close();
    }
  }

  private async step(op: Op): Promise<string> {
    switch (op) {
      case 'add':
        return this.addSome();
      case 'burst':
        if (this.paused) return 'burst skipped (paused)';
        return `burst: ${await this.burst(this.rng.int(3, 20))} handled`;
      case 'pause':
        await this.queue.pause();
        this.paused = true;
        return 'pause';
      case 'resume':
        await this.queue.resume();
        this.paused = false;
        return 'resume';
      case 'kill-worker':
        return this.killWorker();
      case 'kill-server':
        await this.restartServer();
        return 'server SIGKILL + restart';
      case 'kill-server-mid-burst':
        return this.killServerMidBurst();
      case 'reclaim':
        return this.reclaim();
      case 'heal':
        return this.heal();
    }
  }

  private async check(when: string): Promise<void> {
    const problems = [...this.orderProblems, ...(await invariantProblems(this.queue, this.jobs, GROUPS))];
    if (problems.length) throw new Error(this.failure(when, problems));
  }

  private failure(when: string, problems: string[]): string {
    return [
      `model run with seed ${this.seed} (replay: GLIDEMQ_SEED=${this.seed}) broke an invariant ${when}:`,
      ...problems.map((p) => `  - ${p}`),
      'steps:',
      ...this.history.slice(-15).map((h) => `  ${h}`),
    ].join('\n');
  }

  // --- adds -------------------------------------------------------------------------------------

  private jobOptions(mode: Mode, kind: Kind): JobOptions {
    const opts: JobOptions = { attempts: mode === 'fail-once' ? 2 : 1 };
    if (mode === 'fail-once' && this.rng.chance(0.5)) opts.backoff = this.rng.int(10, 200);
    switch (kind) {
      case 'priority':
        opts.priority = this.rng.int(1, 5);
        break;
      case 'lifo':
        opts.lifo = true;
        break;
      case 'delayed':
        opts.delay = this.rng.int(1, 400);
        break;
      case 'group': {
        const id = this.rng.pick(GROUPS) as keyof typeof GROUP_OPTIONS;
        opts.group = { id, ...GROUP_OPTIONS[id] };
        // a delayed job of the ordered group holds its place in the line through its delay
        if (this.rng.chance(0.3)) opts.delay = this.rng.int(1, 400);
        break;
      }
      case 'custom':
        opts.jobId = `c${this.customIds.length + 1}`;
        break;
    }
    return opts;
  }

  private remember(id: string, mode: Mode, kind: Kind, opts: JobOptions): void {
    this.jobs.set(id, { id, mode, runs: 0, crashes: 0, runLog: [] });
    if (opts.group?.ordered) {
      this.orderedPlace.set(id, this.orderedLine.length);
      this.orderedLine.push(id);
    }
    this.totals.jobs++;
    if (kind === 'custom') this.customIds.push(id);
  }

  private async addSome(): Promise<string> {
    if (this.customIds.length && this.rng.chance(0.1)) {
      const id = this.rng.pick(this.customIds);
      const job = await this.queue.add('model', { mode: 'ok' }, { jobId: id });
      if (job.created !== false) throw new Error(this.failure('re-adding a custom id', [`adding existing job ${id} again created it anew`]));
      return `add existing custom id ${id} (nothing added)`;
    }
    const n = this.rng.chance(0.3) ? this.rng.int(2, 15) : 1;
    const planned = Array.from({ length: n }, () => {
      const mode = this.rng.weighted(MODE_WEIGHTS);
      const kind = this.rng.weighted(KIND_WEIGHTS);
      return { mode, kind, opts: this.jobOptions(mode, kind) };
    });
    // a bulk add holds one custom id at most, so two entries never share one
    const seen = new Set<string>();
    for (const p of planned) {
      if (p.opts.jobId && seen.has(p.opts.jobId)) p.opts.jobId = `${p.opts.jobId}-${seen.size}`;
      if (p.opts.jobId) seen.add(p.opts.jobId);
    }
    if (n === 1) {
      const p = planned[0];
      const job = await this.queue.add('model', { mode: p.mode }, p.opts);
      this.remember(job.id, p.mode, p.kind, p.opts);
      return `add ${p.kind} ${p.mode} -> ${job.id}`;
    }
    const added = await this.queue.addBulk(planned.map((p) => ({ name: 'model', data: { mode: p.mode }, opts: p.opts })));
    added.forEach((job, i) => this.remember(job.id, planned[i].mode, planned[i].kind, planned[i].opts));
    return `addBulk ${n}: ${planned.map((p) => `${p.kind}/${p.mode}`).join(' ')}`;
  }

  // --- processing -------------------------------------------------------------------------------

  private readonly processor = async (job: Job) => {
    const m = this.jobs.get(job.id);
    if (!m) throw new Error(`processor got job ${job.id} that the model never added`);
    await this.checkOrder(job.id);
    m.runs++;
    const step = m.mode === 'step' ? ` (step ${(job.data as { step?: string }).step ?? 'first'})` : '';
    m.runLog?.push(this.runNote(`fence ${job.claim?.fence ?? '?'}${step} by worker ${job.claim?.consumer.split(':').pop() ?? '?'}`));
    this.held.add(job.id);
    if (this.hold) await this.hold;
    const data = job.data as { mode: Mode; step?: string };
    if (data.mode === 'fail') throw new Error('model: this job always fails');
    if (data.mode === 'fail-once' && job.attemptsMade === 0) throw new Error('model: the first attempt fails');
    if (data.mode === 'step' && data.step !== 'second') {
      // a fixed park, so the seeded sequence does not depend on when a processor runs
      await job.moveToDelayed(Date.now() + 50, 'second');
      return undefined;
    }
    return 'done';
  };

  /** Where a run came from, with the step and the ms since the run began (a failure prints these). */
  private runNote(what: string): string {
    return `${what} in step ${this.history.length + 1} at ${Date.now() - this.startedAt} ms`;
  }

  /**
   * An ordered group's job starts only once every job added to the group before it has completed
   * or failed for good (delayed ones included: they hold their place). Read when it starts: the
   * earlier jobs' states cannot go back once finished.
   */
  private async checkOrder(id: string): Promise<void> {
    const place = this.orderedPlace.get(id);
    if (place === undefined) return;
    try {
      for (const earlier of this.orderedLine.slice(0, place)) {
        const state = await this.queue.client.hget(this.queue.keys.job(earlier), 'state');
        if (state !== 'completed' && state !== 'failed') {
          this.orderProblems.push(`ordered group job ${id} started while job ${earlier}, added before it, was ${state ?? 'gone'}`);
        }
      }
    } catch {
      /* the server went away under the check (a kill step): nothing to conclude */
    }
  }

  private startWorker(): Worker {
    const w = new Worker(this.queueName, this.processor, {
      connection: this.server().url,
      concurrency: this.rng.int(1, 4),
      prefetch: this.rng.int(0, 2),
      ...FAST,
    });
    w.on('error', () => undefined);
    for (const event of ['completed', 'failed', 'moved', 'lost']) w.on(event, (job: Job) => this.held.delete(job.id));
    return w;
  }

  /** Jobs a worker could take at once: undelivered stream entries, LIFO and prioritized jobs. */
  private async deliverable(): Promise<number> {
    const c = await this.queue.getJobCounts();
    const groupWaiting = Number((await this.queue.client.hget(this.queue.keys.meta, 'groupWaiting')) ?? 0);
    return c.waiting - groupWaiting + c.prioritized;
  }

  /** Nothing is left for a worker now: nothing waiting or claimed, and no delayed job due. */
  private async idle(): Promise<boolean> {
    const c = await this.queue.getJobCounts();
    if (c.waiting + c.prioritized + c.active > 0) return false;
    const due = await this.queue.client.zrangebyscore(this.queue.keys.scheduled, '-inf', Date.now(), 'LIMIT', 0, 1);
    return due.length === 0;
  }

  /** Runs an in-process worker until it has finished `budget` jobs or nothing is left to do. */
  private async burst(budget: number, before?: () => Promise<void>): Promise<number> {
    const w = this.startWorker();
    const handled = () => w.finished.completed + w.finished.failed;
    try {
      if (before) await before();
      await waitFor(async () => handled() >= budget || (await this.idle()), 'a burst to finish its jobs', STEP_MS);
    } finally {
      await w.close();
      this.held.clear();
    }
    return handled();
  }

  private async killWorker(): Promise<string> {
    const child = await startWorkerProcess({
      url: this.server().url,
      queue: this.queueName,
      processor: processorPath('hang.mjs'),
      options: { ...FAST, concurrency: this.rng.int(1, 3) },
    });
    try {
      if (!this.paused && (await this.deliverable()) > 0) {
        await waitFor(() => child.started.length > 0, 'the worker process to start a job', STEP_MS);
      }
    } finally {
      await child.kill();
    }
    const started = [...new Set(child.started)];
    if (this.paused && started.length) {
      throw new Error(this.failure('kill-worker', [`a worker started jobs ${started.join(', ')} while the queue was paused`]));
    }
    for (const id of started) {
      if (!this.jobs.has(id)) throw new Error(this.failure('kill-worker', [`a worker process ran job ${id} that the model never added`]));
      this.jobs.get(id)!.crashes++;
    }
    for (const id of child.started) {
      const m = this.jobs.get(id)!;
      m.runs++;
      m.runLog?.push(this.runNote('a killed worker process'));
    }
    this.totals.workerKills++;
    return `worker SIGKILL holding ${started.join(', ') || 'nothing'}`;
  }

  private async restartServer(): Promise<void> {
    await this.server().restart();
    this.totals.serverKills++;
    await waitFor(() => this.queue.getJobCounts().then(() => true), 'the queue to reach the restarted server', STEP_MS);
  }

  /** SIGKILLs the server while in-process jobs run; they finish against the restarted server. */
  private async killServerMidBurst(): Promise<string> {
    if (this.paused || (await this.deliverable()) === 0) {
      await this.restartServer();
      return 'server SIGKILL + restart (nothing to run)';
    }
    let release!: () => void;
    this.hold = new Promise((r) => (release = r));
    let held: string[] = [];
    const handled = await this.burst(this.rng.int(3, 20), async () => {
      try {
        await waitFor(() => this.held.size > 0, 'a job to start before the server is killed', STEP_MS);
        // a job whose result is on its way when the server dies may run again, like a running one
        held = [...this.held];
        for (const id of held) this.jobs.get(id)!.crashes++;
        await this.restartServer();
      } finally {
        this.hold = undefined;
        release();
      }
    });
    return `server SIGKILL + restart under jobs ${held.join(', ')}; burst handled ${handled}`;
  }

  // --- upkeep -----------------------------------------------------------------------------------

  private maintenance(): Maintenance {
    return new Maintenance(this.queue.client, this.queue.keys, { ...DEFAULT_MAINTENANCE, ...FAST });
  }

  /** Every claim is a dead one at a step's end: this takes those whose own lock (FAST, their terms) ran out. */
  private async reclaim(): Promise<string> {
    const r = await this.maintenance().reclaim({ minIdle: 0, maxStalledCount: FAST.maxStalledCount });
    if (this.paused && (r.redispatched.length || r.failed.length || !r.paused)) {
      throw new Error(this.failure('reclaim', [`reclaim on a paused queue changed claims: ${JSON.stringify(r)}`]));
    }
    return `reclaim: redispatched ${r.redispatched.join(',') || '-'}, failed ${r.failed.join(',') || '-'}${r.paused ? ' (paused)' : ''}`;
  }

  /** A heal, sometimes after losing the list-active tracking (as data from an older library would). */
  private async heal(): Promise<string> {
    const k = this.queue.keys;
    const damage = this.rng.pick(['none', 'forget-set', 'drift-counter'] as const);
    // a queue that does not exist yet has nothing to heal (heal writes nothing there), so no damage
    if (this.jobs.size === 0) return `heal: ${(await this.maintenance().heal()).counterAfter} claims (empty queue)`;
    if (damage === 'forget-set') {
      await this.queue.client.del(k.listActiveIds);
      await this.queue.client.hdel(k.meta, 'listActiveSeeded');
    } else if (damage === 'drift-counter') {
      await this.queue.client.incrby(k.listActive, this.rng.int(1, 5));
    }
    const r = await this.maintenance().heal();
    return `heal after ${damage}: counter ${r.counterBefore} -> ${r.counterAfter}, +${r.membersAdded} -${r.membersDropped}`;
  }

  // --- the end ----------------------------------------------------------------------------------

  /** Resumes, reclaims what dead workers held, processes everything, and checks every outcome. */
  private async finish(): Promise<void> {
    if (this.paused) await this.step('resume');
    await this.reclaim();
    const w = this.startWorker();
    const done = async () => {
      const c = await this.queue.getJobCounts();
      return c.completed + c.failed === this.jobs.size;
    };
    try {
      await waitFor(done, `all ${this.jobs.size} jobs to finish`, 60_000, 50);
    } finally {
      await w.close();
    }
    await this.check('at the end');
    const problems: string[] = [];
    for (const [id, m] of this.jobs) {
      const job = await this.queue.getJob(id);
      const want = m.mode === 'fail' ? 'failed' : 'completed';
      if (job?.state !== want) problems.push(`job ${id} (${m.mode}) ended ${job?.state ?? 'missing'}, expected ${want}`);
      if (m.runs < BASE_RUNS[m.mode]) problems.push(`job ${id} (${m.mode}) ran ${m.runs} times, needs at least ${BASE_RUNS[m.mode]}`);
      if (job?.state === 'completed') this.totals.completed++;
      else if (job?.state === 'failed') this.totals.failed++;
      else this.totals.lost++;
    }
    if (problems.length) throw new Error(this.failure('at the end', problems));
  }
}
