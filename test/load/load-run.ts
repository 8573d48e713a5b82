/**
 * One load run against a test server: starts the workers (CLI processes and an engine Worker),
 * then the producers (processes and one in this process), samples at each interval, stops the
 * producers, waits until every produced job has its outcome, and stops the workers.
 */
import type { Redis } from 'ioredis';
import { loadProcessor } from '../../src/cli/load-processor.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { Harness } from '../helpers/engine.js';
import { waitFor, type TestServer } from '../helpers/valkey.js';
import { processorPath } from '../helpers/worker-spawn.js';
import { CliWorkerChild, ProducerChild, type Child } from './children.js';
import type { LoadPlan } from './plan.js';
import { produce } from './producer.js';
import { Sampler } from './sampler.js';
import { Tally } from './tally.js';

const tick = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

export class LoadRun {
  readonly tally = new Tally();
  readonly harness: Harness;
  readonly workers: Child[] = [];
  readonly producers: ProducerChild[] = [];
  sampler!: Sampler;
  startedAt = 0;
  private stopping = false;
  private readonly inProcess: Promise<number>[] = [];

  constructor(
    readonly plan: LoadPlan,
    private readonly server: () => TestServer,
    private readonly admin: Redis,
  ) {
    this.harness = new Harness(server);
  }

  get producerCount(): number {
    return this.plan.queues.reduce((n, q) => n + q.producerProcesses + (q.inProcessProducer ? 1 : 0), 0);
  }

  get workerCount(): number {
    return this.plan.queues.reduce((n, q) => n + q.cliWorkers + (q.inProcessWorker ? 1 : 0), 0);
  }

  queue(name: string) {
    return this.harness.queues.find((q) => q.name === name)!;
  }

  async startWorkers(): Promise<void> {
    const processor = await loadProcessor(processorPath('load.mjs'));
    for (const q of this.plan.queues) {
      this.harness.queue(q.name);
      for (let i = 0; i < q.cliWorkers; i++) this.workers.push(new CliWorkerChild(this.server().url, q.name, this.plan.concurrency, this.tally));
      if (q.inProcessWorker) {
        const w = this.harness.worker(q.name, processor, { concurrency: this.plan.concurrency });
        w.on('completed', (job: Job) => this.tally.outcome(q.name, job.id, 'completed'));
        w.on('failed', (job: Job) => {
          if (job.state === 'failed') this.tally.outcome(q.name, job.id, 'failed');
        });
      }
    }
    for (const q of this.plan.queues) {
      const want = q.cliWorkers + (q.inProcessWorker ? 1 : 0);
      await waitFor(async () => (await this.queue(q.name).getJobCounts()).consumers >= want || this.deadChild(), `${want} workers on ${q.name}`, 30000, 100);
    }
    this.throwIfDead();
  }

  async startProducers(): Promise<void> {
    const p = this.plan;
    for (const q of p.queues) {
      const settings = (label: string) => ({ label, ratePerSec: p.ratePerProducer, batch: p.batch, highWater: p.highWater, retention: q.retention });
      for (let i = 0; i < q.producerProcesses; i++) {
        this.producers.push(new ProducerChild({ url: this.server().url, queue: q.name, settings: settings(`${q.name}-p${i}`) }, this.tally));
      }
      if (q.inProcessProducer) {
        this.inProcess.push(produce(this.queue(q.name), settings(`${q.name}-local`), () => this.stopping, (b) => this.tally.added(q.name, b)));
      }
    }
    await waitFor(() => this.producers.every((c) => c.ready) || this.deadChild(), 'producer processes to connect', 30000, 50);
    this.throwIfDead();
    this.startedAt = Date.now();
    this.sampler = new Sampler(this.admin, this.harness.queues, () => this.tally.finished);
  }

  /** Samples every interval until the run's time is up (a child that dies ends the run). */
  async sampleUntilDone(onSample?: (line: string) => void): Promise<void> {
    for (let n = 1; Date.now() - this.startedAt < this.plan.runMs; n++) {
      await tick(this.startedAt + n * this.plan.intervalMs - Date.now());
      this.throwIfDead();
      const s = await this.sampler.sample();
      onSample?.(`t=${s.t}s ${s.jobsPerSec} jobs/s used_memory=${s.usedMemory} keys=${s.keys}`);
    }
  }

  /** Stops the producers (each writes its last bulk), then waits until every produced job has its outcome. */
  async drain(timeoutMs = 60000): Promise<void> {
    this.stopping = true;
    const codes = await Promise.all(this.producers.map((c) => c.stop()));
    await Promise.all(this.inProcess);
    codes.forEach((code, i) => {
      if (code !== 0 || !this.producers[i].done) throw new Error(`${this.producers[i].what} exited ${code}: ${this.producers[i].stderr}`);
    });
    await waitFor(() => this.tally.settled || this.deadChild(this.workers), `all ${this.tally.produced.size} produced jobs to finish`, timeoutMs, 100);
    this.throwIfDead(this.workers);
  }

  async stopWorkers(): Promise<(number | null)[]> {
    const codes = await Promise.all(this.workers.map((w) => w.stop()));
    await this.harness.cleanup();
    return codes;
  }

  /** After a failure: end whatever is still running. */
  async abort(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.producers, ...this.workers].map((c) => c.kill()));
    await Promise.allSettled(this.inProcess);
    await this.harness.cleanup();
  }

  private deadChild(among: Child[] = [...this.producers, ...this.workers]): Child | undefined {
    return among.find((c) => !c.alive);
  }

  private throwIfDead(among?: Child[]): void {
    const dead = this.deadChild(among);
    if (dead) throw new Error(`${dead.what} exited early (${dead.proc.exitCode ?? dead.proc.signalCode}): ${dead.stderr}`);
  }
}
