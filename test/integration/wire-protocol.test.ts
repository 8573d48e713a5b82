/**
 * The wire protocol from any language (docs/wire-protocol.md; issue 31): a shell script that uses
 * nothing but valkey-cli (fixtures/wire/enqueue.sh) enqueues a plain job, a delayed job, two
 * prioritized jobs and a once-only call sent twice, after the harness loaded the library as a
 * glidemq client does. A glidemq Worker then processes them: each job completes with the data the
 * script sent, the delayed job is claimed no earlier than its delay after its add (the server's
 * timestamps), the higher priority runs first, and the resent call added nothing.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { installLibrary, LIBRARY_VERSION } from '../../src/engine/connecting/library.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { fixturePath } from '../helpers/fixtures.js';
import { CLI_BIN, useServer, waitFor } from '../helpers/valkey.js';

const run = promisify(execFile);
const SCRIPT = fixturePath('wire', 'enqueue.sh');

/** Runs the script; its lines as label -> glidemq_add's reply (ts, id, created). */
async function enqueue(port: number, queue: string, version: string): Promise<Map<string, string[]>> {
  const { stdout } = await run('bash', [SCRIPT, String(port), queue, version], { env: { ...process.env, VALKEY_CLI: CLI_BIN } });
  const lines = stdout.trim().split('\n').map((l) => l.split(' '));
  return new Map(lines.map(([label, ...reply]) => [label, reply]));
}

describe('wire protocol: enqueue from a shell script with valkey-cli, process with a glidemq Worker', function () {
  this.timeout(30000);
  const server = useServer();
  const h = new Harness(server);
  let admin: Redis;

  before(async () => {
    admin = server().client();
    const [installed] = await installLibrary(admin);
    expect(installed.state).to.equal('current');
  });
  afterEach(() => h.cleanup());
  after(() => admin.disconnect());

  it('plain, delayed, prioritized and once-only jobs added by FCALL run as the Queue\'s own', async () => {
    const name = uniqueQueue('wire');
    const added = await enqueue(server().port, name, LIBRARY_VERSION);
    for (const label of ['plain', 'delayed', 'low', 'high', 'once']) {
      expect(added.get(label)?.[2], `${label} created`).to.equal('1');
    }
    expect(added.get('plain')![1]).to.equal('wire-plain');
    const onceId = added.get('once')![1];
    expect(onceId).to.match(/^\d+$/); // from the queue's counter
    expect(added.get('resent'), 'the resent call gets the first reply').to.deep.equal(added.get('once'));

    const q = h.queue(name);
    // (waiting: the plain job and one once-only job, not two)
    expect(await q.getJobCounts('delayed', 'prioritized', 'waiting')).to.deep.equal({ delayed: 1, prioritized: 2, waiting: 2 });

    const order: string[] = [];
    h.worker(name, async (job) => {
      order.push(job.id);
      return { saw: job.data.kind };
    }, { concurrency: 1 });
    await waitFor(async () => (await q.getJobCounts('completed')).completed === 5, 'the five jobs completed', 15000);

    const ids = { plain: 'wire-plain', delayed: 'wire-delayed', low: 'wire-low', high: 'wire-high', once: onceId };
    for (const [kind, id] of Object.entries(ids)) {
      const job = (await q.getJob(id))!;
      expect(job.state, id).to.equal('completed');
      expect(job.data).to.deep.equal({ kind });
      expect(job.returnvalue).to.deep.equal({ saw: kind });
    }
    expect(order, 'no job ran twice').to.have.length(5);
    expect(order.indexOf('wire-high'), 'priority 1 before priority 10').to.be.below(order.indexOf('wire-low'));
    const delayed = (await q.getJob('wire-delayed'))!;
    expect(delayed.processedOn! - delayed.timestamp, 'claimed after its delay (server times)').to.be.at.least(1500);
    const [high, low] = [(await q.getJob('wire-high'))!, (await q.getJob('wire-low'))!];
    expect(high.processedOn!).to.be.at.most(low.processedOn!);
  });

  it('the script refuses a library other than the one it speaks, and adds nothing', async () => {
    const name = uniqueQueue('wire-old');
    const err = await enqueue(server().port, name, '0000000000000000').then(() => undefined, (e: { code?: number; stderr?: string }) => e);
    expect(err?.code).to.equal(3);
    expect(err?.stderr).to.match(/refusing/);
    expect(await admin.keys(`glide:{${name}}:*`)).to.deep.equal([]);
  });
});
