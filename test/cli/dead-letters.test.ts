/**
 * The CLI over dead letters (README "Dead letters"): `glidemq jobs <dlq>` lists them with the queue
 * and job each failed in, and `glidemq retry <dlq> --from-dead-letter` sends them back to their
 * source queue, once.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { useCliSuite } from '../helpers/cli-suite.js';
import { waitFor } from '../helpers/valkey.js';

describe('CLI: dead letters (jobs <dlq>, retry --from-dead-letter)', function () {
  this.timeout(60000);
  let name: string;
  let q: Queue;
  const { cli, server, harness: h } = useCliSuite('dlcli', (made) => ({ q, name } = made), { env: { TZ: 'UTC' } });

  /** `n` jobs of this test's queue failed for good into its dead-letter queue; returns the dead-letter queue's name and the source ids. */
  async function deadLetters(n: number): Promise<{ dlq: string; ids: string[] }> {
    const dlq = `${name}-dlq`;
    const src = new Queue(name, { connection: server().url, deadLetterQueue: { name: dlq } });
    h.queues.push(src);
    const jobs = await src.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'mail', data: { i } })));
    const w = h.worker(name, async (job) => {
      throw new Error(`bounce ${job.data.i}`);
    });
    await waitFor(async () => (await src.getDeadLetterJobs()).length === n, `${n} dead letters`);
    await w.close();
    return { dlq, ids: jobs.map((j) => j.id) };
  }

  it('jobs <dlq> lists the dead letters (no --state needed) with the queue and job they failed in', async () => {
    const { dlq, ids } = await deadLetters(2);
    const r = await cli(['jobs', dlq], { env: { COLUMNS: '160' } });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/│ from\s+│ reason/);
    for (const id of ids) expect(r.stdout).to.contain(`${name}/${id}`);
    expect(r.stdout).to.match(/bounce 0/);
    const json = await cli(['jobs', dlq, '--json']);
    const lines = json.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.originalJobId).sort()).to.deep.equal([...ids].sort());
    expect(lines.every((l) => l.originalQueue === name && l.state === 'failed')).to.equal(true);
    const one = await cli(['job', dlq, lines[0].id]);
    expect(one.code, one.stderr).to.equal(0);
    expect(one.stdout).to.match(new RegExp(`dead letter of\\s+│ job ${lines[0].originalJobId} in queue ${name}`));
    // a queue that holds no dead letters still needs --state
    const plain = await cli(['jobs', name]);
    expect(plain.code).to.equal(2);
    expect(plain.stderr.trim().split('\n')).to.have.length(1);
    expect(plain.stderr).to.match(/required option '-s, --state <state>'/);
  });

  it('retry <dlq> --from-dead-letter sends them back to their source queue once: dry run, then send, then a resend changes nothing', async () => {
    const { dlq, ids } = await deadLetters(2);
    const dry = await cli(['retry', dlq, '--from-dead-letter', '--dry-run', '--json']);
    expect(dry.code, dry.stderr).to.equal(0);
    const planned = JSON.parse(dry.stdout);
    expect(planned.retried).to.have.length(2);
    expect(planned.sent.map((s: { jobId: string }) => s.jobId).sort()).to.deep.equal([...ids].sort());
    expect(await q.getFailedCount()).to.equal(2);

    const sent = await cli(['retry', dlq, '--from-dead-letter', '--json']);
    expect(sent.code, sent.stderr).to.equal(0);
    const out = JSON.parse(sent.stdout);
    expect(out.retried).to.have.length(2);
    expect(out.sent.every((s: { how: string; queue: string }) => s.how === 'retried' && s.queue === name)).to.equal(true);
    // back in the source queue, waiting with all their attempts; gone from the dead-letter queue
    expect(await q.getFailedCount()).to.equal(0);
    expect(await q.getWaitingCount()).to.equal(2);
    for (const id of ids) expect((await q.getJob(id))!.attemptsMade).to.equal(0);
    const d = h.queue(dlq);
    expect(await d.getFailedCount()).to.equal(0);

    const again = await cli(['retry', dlq, '--from-dead-letter']);
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stdout).to.match(/sent back 0 dead letters/);
    expect(await q.getWaitingCount()).to.equal(2);
  });

  it('retry <dlq> <id> --from-dead-letter: a source job gone meanwhile is added again once; an unknown id is named, exit 2', async () => {
    const { dlq } = await deadLetters(1);
    const d = h.queue(dlq);
    const [letter] = await d.getFailed();
    await q.remove(letter.originalJobId!);
    const r = await cli(['retry', dlq, letter.id, 'nope', '--from-dead-letter', '--json']);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/no job nope/);
    const out = JSON.parse(r.stdout);
    expect(out.sent).to.have.length(1);
    expect(out.sent[0].how).to.equal('added');
    const back = await q.getJob(out.sent[0].jobId);
    expect(back!.name).to.equal('mail');
    expect(back!.data).to.deep.equal({ i: 0 });
    expect(await q.getWaitingCount()).to.equal(1);
    expect(await d.getFailedCount()).to.equal(0);
  });

  it('bad usage of --from-dead-letter exits 2 with one line', async () => {
    for (const [args, says] of [
      [['retry', name, '--from-dead-letter', '--all-failed'], /leave out --all-failed/],
      [['retry', name, '--from-dead-letter', '--since', '1h'], /--since is for --all-failed/],
    ] as [string[], RegExp][]) {
      const r = await cli(args);
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr).to.match(says);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
    }
  });
});
