import { expect } from 'chai';
import type { Job } from '../../src/engine/job.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

// Issue 27 bug 3: a delayed job starts when it is due (server clock), not on the next 1 s tick.
describe('Delayed jobs start on time (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('a delayed add made while a worker waits starts within 50 ms (+ margin) of its due time', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const started: Job[] = [];
    h.worker(name, async (job: Job) => {
      started.push(job);
    });
    await new Promise((r) => setTimeout(r, 300)); // let the worker settle into its blocking read
    const added = await q.add('d', {}, { delay: 300 });
    await waitFor(() => started.length === 1, 'delayed job started');
    const job = (await q.getJob(added.id))!;
    const late = job.processedOn! - (job.timestamp + 300);
    expect(late).to.be.at.least(0);
    expect(late).to.be.below(150);
  });
});
