/**
 * One seeded run of the flow model test: random trees over two queues (children settle parents
 * in their own queue and in the other, in their finish on this standalone server; the cluster's
 * outbox is tested in flows-cluster.test.ts), random failures, retries and failure policies,
 * processed in bursts by in-process workers and by worker processes that are SIGKILLed, with
 * the server SIGKILLed and restarted on its `appendfsync always` AOF, and heal runs. At the end
 * everything is drained and each job is checked against what the model says it must be: a
 * parent runs only once every dependency settled, at most once more than the crashes it lived
 * through, and no flow is stuck.
 */
import { Maintenance, DEFAULT_MAINTENANCE } from '../../src/engine/administering/maintenance.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { FlowProducer, type JobNode } from '../../src/engine/flows/flow-producer.js';
import type { FlowJob } from '../../src/engine/flows/flow-nodes.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { Prng } from '../helpers/prng.js';
import { waitFor, type TestServer } from '../helpers/valkey.js';
import { processorPath, startWorkerProcess } from '../helpers/worker-spawn.js';
import { loadProcessor } from '../../src/cli/load-processor.js';

type Op = 'add' | 'burst' | 'kill-worker' | 'kill-server' | 'kill-server-mid-burst' | 'heal';
const OP_WEIGHTS: Record<Op, number> = { add: 5, burst: 4, 'kill-worker': 1.5, 'kill-server': 0.6, 'kill-server-mid-burst': 0.8, heal: 0.8 };
type Mode = 'ok' | 'fail-once' | 'fail';
const LEAF_MODES: Record<Mode, number> = { ok: 5, 'fail-once': 2, fail: 2 };
/** A child's failure policy toward its parent ('none': BullMQ's default, the parent keeps waiting). */
type Policy = 'none' | 'fail' | 'ignore' | 'remove';
const POLICIES: Record<Policy, number> = { none: 1, fail: 2, ignore: 1.5, remove: 1.5 };
const POLICY_OPTION: Record<Policy, string | undefined> = {
  none: undefined,
  fail: 'failParentOnFailure',
  ignore: 'ignoreDependencyOnFailure',
  remove: 'removeDependencyOnFailure',
};
type Final = 'completed' | 'failed' | 'waiting-children';

/** Short enough for fast recovery of a killed worker's claims, long enough that a live worker's heartbeat is never late. */
const FAST = { lockDuration: 1000, stalledInterval: 500, blockTimeout: 500, promotionInterval: 100, maxStalledCount: 1000 };
const STEP_MS = 30_000;

interface ModelNode {
  name: string;
  queue: string;
  mode: Mode;
  policy: Policy;
  children: ModelNode[];
  id?: string;
  runs: number;
  crashes: number;
}

export interface FlowRunTotals {
  steps: number;
  flows: number;
  jobs: number;
  workerKills: number;
  serverKills: number;
  /** Jobs that fail for good, by their failure policy (so a run shows which paths it took). */
  failing: Record<Policy, number>;
}

export class FlowModelRun {
  readonly rng: Prng;
  readonly totals: FlowRunTotals = { steps: 0, flows: 0, jobs: 0, workerKills: 0, serverKills: 0, failing: { none: 0, fail: 0, ignore: 0, remove: 0 } };
  private readonly history: string[] = [];
  private readonly nodes = new Map<string, ModelNode>(); // by `<queue>/<id>`
  private readonly roots: ModelNode[] = [];
  private readonly problems: string[] = [];
  private readonly queues: Queue[];
  private readonly producer: FlowProducer;
  /** Jobs an in-process processor started and whose finish has not been seen yet. */
  private readonly held = new Set<string>();
  private hold: Promise<void> | undefined;
  private named = 0;
  /** fixtures/processors/flow-node.mjs, the worker processes' processor too. */
  private flowNode!: (job: Job) => Promise<unknown>;

  constructor(
    readonly seed: number,
    private readonly server: () => TestServer,
    readonly queueNames: [string, string],
  ) {
    this.rng = new Prng(seed);
    this.queues = queueNames.map((n) => new Queue(n, { connection: server().url }));
    for (const q of this.queues) q.on('error', () => undefined);
    this.producer = new FlowProducer({ connection: server().url });
    this.producer.on('error', () => undefined);
  }

  async run(steps: number): Promise<FlowRunTotals> {
    this.flowNode = (await loadProcessor(processorPath('flow-node.mjs'))) as (job: Job) => Promise<unknown>;
    try {
      for (let i = 1; i <= steps; i++) {
        const op = this.rng.weighted(OP_WEIGHTS);
        this.history.push(`${i}. ${await this.step(op)}`);
        this.totals.steps++;
        if (this.problems.length) throw new Error(this.failure(`step ${i} (${op})`, this.problems));
      }
      await this.drain();
      const problems = [...this.problems, ...(await this.endProblems())];
      if (problems.length) throw new Error(this.failure('the end', problems));
      return this.totals;
    } finally {
      await Promise.all([...this.queues.map((q) => q.close()), this.producer.close()]);
    }
  }

  private failure(when: string, problems: string[]): string {
    return [
      `flow model seed ${this.seed} failed ${when}:`,
      ...problems.map((p) => `  - ${p}`),
      'steps:',
      ...this.history.map((h) => `  ${h}`),
      `replay: GLIDEMQ_SEED=${this.seed} npx mocha dist/test/model/flow-model.test.js`,
    ].join('\n');
  }

  private async step(op: Op): Promise<string> {
    switch (op) {
      case 'add':
        return this.addFlow();
      case 'burst':
        return `burst: ${await this.burst(this.rng.int(3, 25))} handled`;
      case 'kill-worker':
        return this.killWorker();
      case 'kill-server':
        await this.restartServer();
        return 'server SIGKILL + restart';
      case 'kill-server-mid-burst':
        return this.killServerMidBurst();
      case 'heal':
        return this.heal();
    }
  }

  // --- flows ------------------------------------------------------------------------------------

  private randomTree(depth: number, isRoot: boolean): ModelNode {
    const node: ModelNode = {
      name: `n${++this.named}`,
      queue: this.rng.pick(this.queueNames),
      mode: 'ok',
      policy: isRoot ? 'none' : this.rng.weighted(POLICIES),
      children: [],
      runs: 0,
      crashes: 0,
    };
    const kids = depth > 0 && (isRoot || this.rng.chance(0.45)) ? this.rng.int(1, 3) : 0;
    for (let i = 0; i < kids; i++) node.children.push(this.randomTree(depth - 1, false));
    node.mode = kids ? (this.rng.chance(0.2) ? 'fail-once' : 'ok') : this.rng.weighted(LEAF_MODES);
    return node;
  }

  private asFlowJob(n: ModelNode): FlowJob {
    const policy = POLICY_OPTION[n.policy];
    return {
      name: n.name,
      queueName: n.queue,
      data: { node: n.name, mode: n.mode },
      opts: { attempts: n.mode === 'fail-once' ? 3 : 1, ...(policy ? { [policy]: true } : {}) },
      children: n.children.map((c) => this.asFlowJob(c)),
    };
  }

  private remember(n: ModelNode, added: JobNode): void {
    n.id = added.job.id;
    this.nodes.set(`${n.queue}/${n.id}`, n);
    this.totals.jobs++;
    if (n.mode === 'fail') this.totals.failing[n.policy]++;
    const kids = added.children ?? [];
    if (kids.length !== n.children.length) this.problems.push(`flow ${n.name}: ${n.children.length} children added, ${kids.length} answered`);
    // the answer lists the children in the order they were given
    n.children.forEach((c, i) => kids[i] && this.remember(c, kids[i]));
  }

  /** Adds one to three flows in one turn (stored together, src/engine/flows/flow-coalescer.ts). */
  private async addFlow(): Promise<string> {
    const roots = Array.from({ length: this.rng.int(1, 3) }, () => this.randomTree(this.rng.int(1, 3), true));
    const added = await Promise.all(roots.map((root) => this.producer.add(this.asFlowJob(root))));
    roots.forEach((root, i) => {
      this.remember(root, added[i]);
      this.roots.push(root);
      this.totals.flows++;
    });
    return `add ${roots.length === 1 ? 'flow' : 'flows'} ${roots.map((r) => this.describe(r)).join(' + ')}`;
  }

  private describe(n: ModelNode): string {
    const own = `${n.name}@${n.queue.slice(-1)}${n.mode === 'ok' ? '' : `:${n.mode}`}${n.policy === 'none' ? '' : `/${n.policy}`}`;
    return n.children.length ? `${own}(${n.children.map((c) => this.describe(c)).join(' ')})` : own;
  }

  /** What a node must end as, from its own mode and its children's ends and policies. */
  private expected(n: ModelNode): Final {
    if (n.children.length === 0) return n.mode === 'fail' ? 'failed' : 'completed';
    const ends = n.children.map((c) => [c, this.expected(c)] as const);
    if (ends.some(([c, e]) => e === 'failed' && c.policy === 'fail')) return 'failed';
    if (ends.some(([c, e]) => e === 'waiting-children' || (e === 'failed' && c.policy === 'none'))) return 'waiting-children';
    return 'completed';
  }

  // --- processing -------------------------------------------------------------------------------

  /** The in-process processor of `queue`: the fixture's, after checking that a parent's dependencies all settled. */
  private processorOf = (queue: string) => async (job: Job) => {
    const m = this.nodes.get(`${queue}/${job.id}`);
    if (!m) {
      this.problems.push(`a worker ran ${queue}/${job.id}, which the model never added`);
      return null;
    }
    this.held.add(`${queue}/${job.id}`);
    m.runs++;
    if (m.children.length) {
      const left = (await job.getDependenciesCount({ unprocessed: true })).unprocessed ?? 0;
      if (left > 0) this.problems.push(`parent ${m.name} started with ${left} dependencies not settled`);
    }
    if (this.hold) await this.hold;
    return this.flowNode(job);
  };

  private startWorkers(): { finished: () => number; close: () => Promise<void> } {
    let finished = 0;
    const workers = this.queueNames.map((name) => {
      const w = new Worker(name, this.processorOf(name), { ...FAST, connection: this.server().url, concurrency: 4 });
      const done = (job?: Job) => {
        if (job) this.held.delete(`${name}/${job.id}`);
        finished++;
      };
      w.on('completed', done);
      w.on('failed', done);
      w.on('error', () => undefined);
      return w;
    });
    return {
      finished: () => finished,
      close: async () => {
        await Promise.all(workers.map((w) => w.close()));
        this.held.clear();
      },
    };
  }

  /** Nothing runnable is left in either queue. */
  private async idle(): Promise<boolean> {
    for (const q of this.queues) {
      const c = await q.getJobCounts('waiting', 'prioritized', 'active', 'delayed');
      if (c.waiting + c.prioritized + c.active + c.delayed > 0) return false;
    }
    return true;
  }

  private async burst(budget: number, during?: () => Promise<void>): Promise<number> {
    const w = this.startWorkers();
    try {
      if (during) await during();
      await waitFor(async () => w.finished() >= budget || (await this.idle()), 'a burst to finish its jobs', STEP_MS);
    } finally {
      await w.close();
    }
    return w.finished();
  }

  private async killWorker(): Promise<string> {
    const queue = this.rng.pick(this.queueNames);
    const child = await startWorkerProcess({
      url: this.server().url,
      queue,
      processor: processorPath('flow-node.mjs'),
      options: { ...FAST, concurrency: this.rng.int(1, 3) },
    });
    const after = this.rng.int(1, 6);
    try {
      const q = this.queues[this.queueNames.indexOf(queue)];
      const c = await q.getJobCounts('waiting', 'prioritized');
      // killed after a few starts: a job before them may be between its finish and the relay of its settlement
      const ready = c.waiting + c.prioritized;
      if (ready > 0) await waitFor(() => child.started.length >= Math.min(after, ready), 'the worker process to start some jobs', STEP_MS);
    } finally {
      await child.kill();
    }
    const done = new Set(child.completed);
    for (const id of child.started) {
      const m = this.nodes.get(`${queue}/${id}`);
      if (!m) {
        this.problems.push(`a worker process ran ${queue}/${id}, which the model never added`);
        continue;
      }
      m.runs++;
      if (!done.has(id)) m.crashes++;
    }
    this.totals.workerKills++;
    return `worker SIGKILL on ${queue} after ${child.started.length} starts (${child.completed.length} completed)`;
  }

  private async restartServer(): Promise<void> {
    await this.server().restart();
    this.totals.serverKills++;
    await waitFor(() => this.queues[0].getJobCounts().then(() => true), 'the queues to reach the restarted server', STEP_MS);
  }

  private async killServerMidBurst(): Promise<string> {
    if (await this.idle()) {
      await this.restartServer();
      return 'server SIGKILL + restart (nothing to run)';
    }
    let release!: () => void;
    this.hold = new Promise((r) => (release = r));
    let held: string[] = [];
    const handled = await this.burst(this.rng.int(3, 20), async () => {
      try {
        await waitFor(() => this.held.size > 0, 'a job to start before the server is killed', STEP_MS);
        held = [...this.held];
        for (const key of held) this.nodes.get(key)!.crashes++;
        await this.restartServer();
      } finally {
        this.hold = undefined;
        release();
      }
    });
    return `server SIGKILL + restart under ${held.join(', ')}; burst handled ${handled}`;
  }

  private async heal(): Promise<string> {
    const relayed: number[] = [];
    for (const q of this.queues) {
      const report = await new Maintenance(q.client, q.keys, { ...DEFAULT_MAINTENANCE, ...FAST }).heal();
      relayed.push(report.outboxRelayed ?? 0);
    }
    return `heal (outbox records relayed: ${relayed.join(', ')})`;
  }

  // --- the end ----------------------------------------------------------------------------------

  /** Runs workers until nothing is runnable and no outbox record is left (maintenance relays a crash's). */
  private async drain(): Promise<void> {
    const w = this.startWorkers();
    try {
      await waitFor(async () => (await this.idle()) && (await this.outboxSize()) === 0 && (await this.idle()), 'every flow to settle', 90_000);
    } finally {
      await w.close();
    }
  }

  private async outboxSize(): Promise<number> {
    let n = 0;
    for (const q of this.queues) n += await q.client.hlen(q.keys.flowOutbox);
    return n;
  }

  private async endProblems(): Promise<string[]> {
    const out: string[] = [];
    for (const m of this.nodes.values()) {
      const q = this.queues[this.queueNames.indexOf(m.queue)];
      const want = this.expected(m);
      const state = await q.getJobState(m.id!);
      if (state !== want) out.push(`${m.name} (${m.queue}/${m.id}) is ${state}, the model says ${want}`);
      const attempts = m.mode === 'fail-once' ? 2 : 1;
      if (m.runs > m.crashes + attempts) out.push(`${m.name} ran ${m.runs} times with ${m.crashes} crashes: at most ${m.crashes + attempts}`);
      if (m.children.length && want !== 'completed' && m.runs > 0) out.push(`parent ${m.name} ended ${want} yet ran ${m.runs} times`);
      if (want === 'completed' && m.runs === 0) out.push(`${m.name} completed without running`);
      if (m.children.length && want === 'completed') {
        const job = await q.getJob(m.id!);
        const values = Object.values((await job?.getChildrenValues()) ?? {}) as { node: string }[];
        const got = values.map((v) => v.node).sort();
        const completedKids = m.children.filter((c) => this.expected(c) === 'completed').map((c) => c.name).sort();
        if (got.join() !== completedKids.join()) out.push(`parent ${m.name} sees children values [${got}], the completed children are [${completedKids}]`);
      }
    }
    if ((await this.outboxSize()) > 0) out.push(`${await this.outboxSize()} outbox records were never relayed`);
    return out;
  }
}
