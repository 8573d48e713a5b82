/**
 * The hot path's server cost counted in instructions, which a busy machine does not blur as it
 * blurs timings: a valkey-server under callgrind, a backlog of tiny jobs (removeOnComplete), and
 * glidemq_finishMany called directly, each call completing a batch of `batch` jobs and claiming
 * the next `batch` (what a worker's finish-and-claim does), until the backlog is done. Prints the
 * instructions per job inside FCALL (callgrind's inclusive count of fcallCommand). Two builds are
 * compared by running this in each; the count repeats within about 0.2 %.
 *
 *   node dist/test/bench/instructions.js [jobs=2000] [batch=40]
 *
 * Needs valgrind (callgrind.ts).
 */
import { Queue } from '../../src/index.js';
import { fetchClaims, finishAll, runCount, startCallgrindServer } from './callgrind.js';

runCount('instructions', async () => {
  const jobs = Number(process.argv[2] ?? 2000);
  const batch = Number(process.argv[3] ?? 40);
  const server = await startCallgrindServer('instr');
  let q: Queue | undefined;
  try {
    q = new Queue('q', { connection: server.url });
    await q.waitUntilReady();
    for (let done = 0; done < jobs; done += 1000) {
      await q.addBulk(Array.from({ length: Math.min(1000, jobs - done) }, (_, i) => ({ name: 'n', data: { i: done + i }, opts: { removeOnComplete: true } })));
    }
    const claims = await fetchClaims(server.admin, q.keys.meta, batch);
    server.zero();
    const finished = await finishAll(server.admin, q.keys.meta, claims, batch);
    server.dump();
    const perJob = server.fcallInstructions(1).count / finished;
    console.log(`${finished} jobs in batches of ${batch}: ${(perJob / 1000).toFixed(2)}k server instructions per job inside FCALL`);
  } finally {
    await q?.close();
    await server.stop();
  }
});
