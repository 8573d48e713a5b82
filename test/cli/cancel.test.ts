/**
 * `glidemq cancel <queue> <id...>` (issue 30): revokes jobs through queue.revoke. A destructive
 * command like the others (--dry-run changes nothing, no terminal refuses without --yes), its
 * answers per id on stdout or in --json, finished and unknown ids named on stderr.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { GLIDEMQ_BIN, runCli } from '../helpers/cli.js';
import { runInPty } from '../helpers/pty.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer } from '../helpers/valkey.js';

describe('CLI: cancel', function () {
  this.timeout(60000);
  const server = useServer();
  const cli = (args: string[]) => runCli(['-u', server().url, ...args]);
  let q: Queue;
  let name: string;
  beforeEach(() => {
    name = uniqueQueue('cancel');
    q = new Queue(name, { connection: server().url });
  });
  afterEach(() => q.close());

  /** A job claimed by hand, as a worker's fetch claims it: it is running. */
  async function running(): Promise<string> {
    await q.add('run', {}, { priority: 1 });
    const r = (await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c', 1, 30_000, 1)) as ClaimReply[];
    return decodeClaim(r[1]).id;
  }

  it('refuses without --yes when there is no terminal, and changes nothing', async () => {
    const job = await q.add('a', {});
    const r = await cli(['cancel', name, job.id]);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/without --yes/);
    expect(await q.getJobState(job.id)).to.equal('waiting');
  });

  it('on a terminal it asks; anything but yes changes nothing, says so and exits 1', async () => {
    const job = await q.add('a', {});
    const argv = [process.execPath, GLIDEMQ_BIN, '-u', server().url, 'cancel', name, job.id];
    const no = await runInPty(argv, '[y/N]', 'n\n', { NO_COLOR: '1' });
    expect(no.output).to.include(`cancel 1 job of ${name}? This cannot be undone. [y/N]`);
    expect(no.output).to.include('nothing changed');
    expect(no.code).to.equal(1);
    expect(await q.getJobState(job.id)).to.equal('waiting');
    const yes = await runInPty(argv, '[y/N]', 'y\n', { NO_COLOR: '1' });
    expect(yes.code, yes.output).to.equal(0);
    expect(await q.getJobState(job.id)).to.equal('failed');
  });

  it('--dry-run says what each id would get and changes nothing', async () => {
    const waiting = await q.add('a', {});
    const delayed = await q.add('d', {}, { delay: 60_000 });
    const active = await running();
    const r = await cli(['cancel', name, waiting.id, delayed.id, active, 'nope', '--dry-run', '--json']);
    expect(r.code, r.stderr).to.equal(2);
    expect(JSON.parse(r.stdout)).to.deep.equal({ queue: name, dryRun: true, revoked: [waiting.id, delayed.id], flagged: [active], finished: [], notFound: ['nope'] });
    expect(await q.getJobState(waiting.id)).to.equal('waiting');
    expect(await q.getJobState(delayed.id)).to.equal('delayed');
    expect(await q.client.hget(q.keys.job(active), 'revoked')).to.equal(null);
  });

  it('--yes revokes waiting and delayed jobs, flags a running one, and exits 0', async () => {
    const waiting = await q.add('a', {});
    const delayed = await q.add('d', {}, { delay: 60_000 });
    const active = await running();
    const r = await cli(['cancel', name, waiting.id, delayed.id, active, '--yes']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.contain(`revoked 2 jobs (${waiting.id}, ${delayed.id})`);
    expect(r.stdout).to.contain(`flagged 1 running job (${active})`);
    for (const id of [waiting.id, delayed.id]) {
      const job = await q.getJob(id);
      expect(job?.state).to.equal('failed');
      expect(job?.failedReason).to.equal('revoked');
    }
    expect(await q.getJobState(active)).to.equal('active');
    expect(await q.client.hget(q.keys.job(active), 'revoked')).to.not.equal(null);
  });

  it('names a finished job (exit 1) and an unknown id (exit 2) on stderr; a repeat answers the same', async () => {
    const job = await q.add('a', {});
    const first = await cli(['cancel', name, job.id, '--yes', '--json']);
    expect(JSON.parse(first.stdout).revoked).to.deep.equal([job.id]);
    const again = await cli(['cancel', name, job.id, '--yes', '--json']);
    expect(again.code).to.equal(0);
    expect(JSON.parse(again.stdout).revoked, 'a repeat').to.deep.equal([job.id]);

    const done = await running();
    const fence = await q.client.hget(q.keys.job(done), 'fence');
    await q.client.fcall('glidemq_finish', 1, q.keys.meta, done, fence!, 'c', 'completed', '1', -1, 0, '', 1, '0', 30_000, 1);
    const finished = await cli(['cancel', name, done, '--yes']);
    expect(finished.code).to.equal(1);
    expect(finished.stderr).to.contain(`finished before, left as they were: ${done}`);
    const unknown = await cli(['cancel', name, 'nope', '--yes']);
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.contain('not found in queue');
  });
});
