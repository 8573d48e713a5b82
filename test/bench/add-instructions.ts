/**
 * A plain add's server cost counted in instructions (as flow-instructions.ts counts a flow's): a
 * valkey-server under callgrind, `jobs` jobs added by Queue.addBulk in bulks of `bulk`, each job
 * with its own data and options of its own (so the bulk goes through glidemq_add, 12 arguments
 * per job) or, with `shared`, options shared by the bulk (glidemq_addData, its data alone).
 * Prints the instructions per job inside FCALL (callgrind's inclusive count of fcallCommand).
 *
 *   node dist/test/bench/add-instructions.js [jobs=2000] [bulk=50] [shared]
 *
 * Needs valgrind (callgrind.ts).
 */
import { Queue } from '../../src/index.js';
import { runCount, startCallgrindServer } from './callgrind.js';

runCount('add-instructions', async () => {
  const jobs = Number(process.argv[2] ?? 2000);
  const bulk = Number(process.argv[3] ?? 50);
  const shared = process.argv[4] === 'shared';
  const server = await startCallgrindServer('add-instr');
  let queue: Queue | undefined;
  try {
    queue = new Queue('a', { connection: server.url });
    await queue.waitUntilReady();
    // shared: every job the same options; else each its own attempts (a bulk of mixed options)
    const bulkOf = (from: number) => Array.from({ length: bulk }, (_, i) => ({
      name: 'job', data: { n: from + i }, opts: shared ? { removeOnComplete: true } : { removeOnComplete: true, attempts: 1 + (i % 2) },
    }));
    await queue.addBulk(bulkOf(-bulk)); // load and connect outside the count
    server.zero();
    for (let added = 0; added < jobs; added += bulk) await queue.addBulk(bulkOf(added));
    server.dump();
    const perJob = server.fcallInstructions(1).count / jobs;
    console.log(`${jobs} jobs in bulks of ${bulk} (${shared ? 'shared options: glidemq_addData' : 'options per job: glidemq_add'}): ` +
      `${(perJob / 1000).toFixed(1)}k server instructions per job inside FCALL`);
  } finally {
    await queue?.close();
    await server.stop();
  }
});
