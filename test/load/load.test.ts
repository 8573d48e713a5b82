/**
 * Load: many producers and workers (child processes and in-process ones) on two queues with
 * retention on (one kept by count, one by age), against a test-started valkey-server. Valkey memory,
 * key count and every structure retention bounds must stay flat after warm-up and within their caps,
 * throughput must not collapse, and every produced job must end as designed: lost = 0.
 * Short form in the normal suite; GLIDEMQ_SOAK=1 runs it for $GLIDEMQ_SOAK_MINUTES and prints the table.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { useServer } from '../helpers/valkey.js';
import { endStateProblems } from './end-state.js';
import { LoadRun } from './load-run.js';
import { loadPlan } from './plan.js';
import { capProblems, flatnessProblems, summary, table, throughputProblems } from './report.js';

describe('load: sustained producers and workers with retention', function () {
  const plan = loadPlan();
  this.timeout(plan.runMs + 180_000);
  const server = useServer();
  let admin: Redis;
  let run: LoadRun | undefined;
  before(() => {
    admin = server().client();
  });
  after(async () => {
    await run?.abort();
    admin?.disconnect();
  });

  it(`keeps memory and structures flat, throughput stable, and loses nothing (${plan.runMs / 1000}s)`, async () => {
    run = new LoadRun(plan, server, admin);
    await run.startWorkers();
    await run.startProducers();
    await run.sampleUntilDone(plan.soak ? (line) => console.log(`    ${line}`) : undefined);
    const samples = run.sampler.samples;
    const measured = samples.filter((s) => s.t * 1000 >= plan.warmupMs);
    await run.drain();
    const ends = await Promise.all(plan.queues.map((q) => endStateProblems(run!.queue(q.name), q, run!.tally, run!.startedAt)));
    const workerCodes = await run.stopWorkers();
    const names = plan.queues.map((q) => q.name);
    const t = run.tally;
    const text = summary(measured, {
      producers: run.producerCount,
      workers: run.workerCount,
      produced: t.produced.size,
      completed: t.completed.size,
      failed: t.failed.size,
      lost: [...t.produced].filter((k) => !t.completed.has(k) && !t.failed.has(k)).length,
      seconds: Math.round(plan.runMs / 1000),
    });
    if (plan.soak) console.log(`\n${table(samples, names)}\n\n${text}\n`);
    else console.log(text.split('\n').map((l) => `      ${l}`).join('\n'));
    const problems = [
      ...t.problems(),
      ...capProblems(samples, Object.fromEntries(plan.queues.map((q) => [q.name, q.caps])), run.startedAt),
      ...flatnessProblems(measured, names),
      ...throughputProblems(measured),
      ...ends.flat(),
      ...workerCodes.flatMap((code, i) => (code === 0 ? [] : [`${run!.workers[i].what} exited ${code}: ${run!.workers[i].stderr}`])),
    ];
    expect(problems, `${problems.join('\n')}\n\n${table(samples, names)}`).to.deep.equal([]);
    expect(t.produced.size, 'jobs produced').to.be.greaterThan(0);
  });
});
