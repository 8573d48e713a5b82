import { expect } from 'chai';
import type { Job } from '../../src/engine/jobs/job.js';
import type { JobType } from '../../src/engine/inspecting/job-queries.js';
import type { Queue } from '../../src/engine/queue/queue.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

/** Every state getJobs and getJobCounts know that a job of this test can be in. */
const STATES: JobType[] = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed'];

/** The ids getJobs lists over every state, each with how many times it was listed. */
async function listedOnce(q: Queue, total: number): Promise<string[]> {
  const jobs = await q.getJobs(STATES, 0, -1, true);
  const ids = jobs.map((j: Job) => j.id);
  const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
  expect(twice, 'jobs listed twice').to.deep.equal([]);
  return ids;
}

describe('Listing jobs while workers claim them (issue 27, bug 6)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('every job is in exactly one state in every getJobs listing and every count, prefetched claims included', async function () {
    this.timeout(60_000);
    const name = uniqueQueue('listing');
    const q = h.queue(name);
    const reader = h.queue(name);
    const N = 400;
    const all = new Set<string>();
    // stream, LIFO, prioritized and group jobs: each kind is claimed by its own path
    const kinds = [{}, { lifo: true }, { priority: 2 }, { group: { id: 'g1', maxConcurrency: 2 } }, { group: { id: 'g2' } }];
    const added = await q.addBulk(Array.from({ length: N }, (_, i) => ({ name: 'l', data: { i }, opts: kinds[i % kinds.length] })));
    for (const j of added) all.add(j.id);
    let done = 0;
    const processor = async (job: Job) => {
      await new Promise((r) => setTimeout(r, Math.random() < 0.5 ? 0 : 2));
      done++;
      if (job.data.i % 9 === 0) throw new Error('fails on purpose');
    };
    for (let w = 0; w < 3; w++) h.worker(name, processor, { concurrency: 2, prefetch: 4 });
    const problems: string[] = [];
    let reads = 0;
    while (done < N) {
      const [ids, counts] = await Promise.all([listedOnce(reader, N), reader.getJobCounts()]);
      reads++;
      const missing = [...all].filter((id) => !ids.includes(id));
      if (missing.length) problems.push(`read ${reads}: ${missing.length} missing (${missing.slice(0, 5).join(', ')})`);
      if (ids.length !== N && !missing.length) problems.push(`read ${reads}: ${ids.length} listed of ${N}`);
      const counted = STATES.reduce((s, t) => s + (counts as unknown as Record<string, number>)[t], 0) + counts.paused;
      if (counted !== N) problems.push(`read ${reads}: counts add up to ${counted}, not ${N}`);
    }
    expect(problems, `after ${reads} reads`).to.deep.equal([]);
    await waitFor(async () => (await q.getJobCounts()).active === 0, 'every job finished');
    const counts = await q.getJobCounts();
    for (const t of STATES) expect((await q.getJobs(t)).length, t).to.equal((counts as unknown as Record<string, number>)[t]);
    expect(counts.completed + counts.failed).to.equal(N);
  });
});
