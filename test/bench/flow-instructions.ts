/**
 * A flow's server cost counted in instructions, which a busy machine does not blur as it blurs
 * timings (the flow.cpu row's measure, counted): a valkey-server under callgrind, `flows` flows of
 * a parent (queue 'p') and 10 children (queue 'c') added by a FlowProducer, then run to the end
 * with direct FCALLs the way a worker runs them: the children claimed and finished in batches of
 * `batch` (glidemq_finishMany, each finishing a batch and claiming the next), their last finish
 * releasing each parent, then the parents likewise. Every job is removeOnComplete, as the bench's.
 * Prints the instructions per flow inside FCALL (callgrind's inclusive count of fcallCommand) for
 * each phase (add, children, parents) and in all. With `annotate`, also prints the head of
 * callgrind_annotate --inclusive=yes for each phase (which commands and how much Lua each costs).
 *
 *   node dist/test/bench/flow-instructions.js [flows=200] [batch=10] [annotate]
 *
 * Needs valgrind (callgrind.ts).
 */
import { FlowProducer, Queue } from '../../src/index.js';
import { runAll, runCount, startCallgrindServer } from './callgrind.js';

const GONE = { removeOnComplete: true };

runCount('flow-instructions', async () => {
  const flows = Number(process.argv[2] ?? 200);
  const batch = Number(process.argv[3] ?? 10);
  const annotate = process.argv[4] === 'annotate';
  const server = await startCallgrindServer('flow-instr');
  const { admin, url } = server;
  let producer: FlowProducer | undefined;
  const queues: Queue[] = [];
  try {
    producer = new FlowProducer({ connection: url });
    for (const name of ['p', 'c']) {
      const q = new Queue(name, { connection: url });
      await q.waitUntilReady();
      queues.push(q);
    }
    const [parents, children] = queues;
    const flowOf = (tag: number) => ({
      name: 'parent', queueName: 'p', data: { tag }, opts: GONE,
      children: Array.from({ length: 10 }, (_, i) => ({ name: 'child', queueName: 'c', data: { i }, opts: GONE })),
    });
    await producer.add(flowOf(-1)); // load and connect outside the count
    await runAll(admin, children.keys.meta, batch);
    await runAll(admin, parents.keys.meta, batch);
    server.zero();
    for (let added = 0; added < flows; added += 8) {
      await Promise.all(Array.from({ length: Math.min(8, flows - added) }, (_, i) => producer!.add(flowOf(added + i))));
    }
    server.dump();
    const kids = await runAll(admin, children.keys.meta, batch);
    server.dump();
    const tops = await runAll(admin, parents.keys.meta, batch);
    server.dump();
    if (kids !== flows * 10 || tops !== flows) throw new Error(`ran ${kids} children and ${tops} parents of ${flows} flows`);
    let total = 0;
    const parts: string[] = [];
    for (const [i, phase] of ['add', 'children', 'parents'].entries()) {
      const { count, annotated } = server.fcallInstructions(i + 1);
      const perFlow = count / flows;
      total += perFlow;
      parts.push(`${phase} ${(perFlow / 1000).toFixed(1)}k`);
      if (annotate) console.log(`--- ${phase}\n${annotated.split('\n').slice(0, 90).join('\n')}`);
    }
    console.log(`${flows} flows of 10 children, batches of ${batch}: ${(total / 1000).toFixed(1)}k server instructions per flow inside FCALL (${parts.join(', ')})`);
  } finally {
    await producer?.close();
    for (const q of queues) await q.close();
    await server.stop();
  }
});
