/**
 * Queue and Worker through Valkey Sentinel (real `valkey-server --sentinel` processes): a
 * `redis+sentinel://` URL or ioredis's own sentinel options, every connection (blocking ones too)
 * finding the primary through the sentinels, and a failover under a running worker.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import type { Redis } from 'ioredis';
import { acquireClient, closeClient, duplicateClient, parseUrl, redactUrl, waitReady } from '../../src/engine/connecting/connection.js';
import { ConnectionError } from '../../src/engine/shared/errors.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useSentinelSet } from '../helpers/sentinel.js';
import { waitFor } from '../helpers/valkey.js';

let seq = 0;
const uniqueName = (stem: string) => `sentinel-${stem}-${process.pid}-${seq++}`;

/** The port of the server a client's socket is connected to. */
const remotePort = (c: unknown) => (c as { stream?: { remotePort?: number } }).stream?.remotePort;

describe('Sentinel URLs', () => {
  it('parse into the sentinels, the master name, the primary\'s credentials and database', () => {
    const p = parseUrl('valkey+sentinel://ops:p%2Fw@10.0.0.1:26380,sentinel-b,[::1]:26381/orders/4');
    expect(p.sentinel).to.deep.equal({
      sentinels: [{ host: '10.0.0.1', port: 26380 }, { host: 'sentinel-b', port: 26379 }, { host: '::1', port: 26381 }],
      name: 'orders',
    });
    expect(p).to.include({ username: 'ops', password: 'p/w', db: 4, tls: false, host: '10.0.0.1', port: 26380 });
    expect(parseUrl('rediss+sentinel://h/m').tls).to.equal(true);
    expect(parseUrl('valkeys+sentinel://h/m').tls).to.equal(true);
    expect(parseUrl('redis+sentinel://h/cache%2Eeu-1').sentinel?.name).to.equal('cache.eu-1');
  });

  it('refuse a missing master name, a bad port, an empty address, an extra path part, an unencoded "/" in the password', () => {
    for (const [url, says] of [
      ['redis+sentinel://h:26379', 'names no master'],
      ['redis+sentinel://h:26379/', 'names no master'],
      ['redis+sentinel://h:0/m', 'bad port'],
      ['redis+sentinel://h:99999/m', 'bad port'],
      ['redis+sentinel://h:1,,h:2/m', 'empty sentinel address'],
      ['redis+sentinel://h/m/1/2', 'expected redis+sentinel://'],
      ['redis+sentinel://h/m/x', 'invalid database number'],
      ['redis+sentinel://u:se/cret@h/m', '%2F'],
    ]) {
      expect(() => parseUrl(url), url).to.throw(says);
      try {
        parseUrl(url);
      } catch (err) {
        expect((err as Error).message, url).not.to.include('cret');
      }
    }
  });

  it('redact the password as plain URLs do', () => {
    expect(redactUrl('redis+sentinel://ops:s3cret@h1:26379,h2:26379/m')).to.equal('redis+sentinel://ops:***@h1:26379,h2:26379/m');
    expect(redactUrl('valkeys+sentinel://:s3cret@h1/m/2')).to.equal('valkeys+sentinel://:***@h1/m/2');
  });
});

describe('Valkey Sentinel (library)', function () {
  this.timeout(60000);
  const set = useSentinelSet({ password: 'pa/ss' });
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((f) => f().catch(() => undefined)));
  });

  it('a Queue and a Worker over a redis+sentinel:// URL add and process jobs on the primary (database from the URL)', async () => {
    const s = set();
    const url = s.url({ db: 3 });
    const name = uniqueName('basic');
    const q = new Queue(name, { connection: url });
    closers.push(() => q.close());
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await q.add('n', { i })).id);
    const seen: number[] = [];
    const w = new Worker(name, async (job: Job) => {
      seen.push((job.data as { i: number }).i);
      return job.data;
    }, { connection: url, blockTimeout: 500 });
    closers.push(() => w.close());
    await waitFor(async () => (await q.getJobCounts()).completed === 5, 'five completed jobs');
    expect(seen.sort()).to.deep.equal([0, 1, 2, 3, 4]);
    // on the primary, in database 3
    const primary = await s.primary();
    const direct = primary.client();
    closers.push(async () => direct.disconnect());
    await direct.select(3);
    expect(await direct.exists(q.keys.meta)).to.equal(1);
    expect(remotePort(q.client)).to.equal(primary.port);
  });

  it('ioredis sentinel options work as a connection too, and duplicates (blocking reads) follow the sentinels', async () => {
    const s = set();
    const options = { sentinels: s.sentinels.map((x) => ({ host: '127.0.0.1', port: x.port })), name: s.name, password: 'pa/ss' };
    const acquired = acquireClient(options);
    const dup = duplicateClient(acquired, { maxRetriesPerRequest: null });
    closers.push(() => closeClient(acquired.client), () => closeClient(dup));
    expect(acquired.settings?.url).to.equal(`redis+sentinel://${s.sentinels.map((x) => x.address).join(',')}/${s.name}`);
    await waitReady(dup, 'dup');
    const primary = await s.primary();
    expect(remotePort(dup)).to.equal(primary.port);
    expect((dup as Redis).options.sentinels).to.have.length(3);
  });

  it('a closed Queue and Worker leave nothing open: the process ends on its own (the sentinel subscriptions are closed too)', async () => {
    const url = set().url();
    const index = new URL('../../src/index.js', import.meta.url).href;
    const code = `import { Queue, Worker } from ${JSON.stringify(index)};
      const url = ${JSON.stringify(url)};
      const q = new Queue('exit-check', { connection: url });
      await q.add('a', {});
      const w = new Worker('exit-check', async () => 1, { connection: url, blockTimeout: 500 });
      await new Promise((r) => w.on('completed', r));
      await w.close();
      await q.close();`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'ignore', 'pipe'] });
    closers.push(async () => child.kill('SIGKILL'));
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exit = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(exit, stderr).to.equal(0);
  });

  it('a master name no sentinel knows fails with a message naming the sentinels and the name, never the password', async () => {
    const s = set();
    const url = s.url({ name: 'nosuch' });
    const acquired = acquireClient({ url, options: { retryStrategy: (n: number) => (n > 1 ? null : 50) } });
    closers.push(() => closeClient(acquired.client));
    let err: unknown;
    try {
      await waitReady(acquired.client, url, 10000);
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConnectionError);
    const msg = (err as Error).message;
    expect(msg, msg).to.include('no sentinel knows a master named "nosuch"');
    for (const x of s.sentinels) expect(msg).to.include(x.address);
    expect(msg).not.to.include('pa/ss').and.not.to.include('pa%2Fss');
  });

  it('a failover under a running worker: every job added before and after completes, the same worker follows the new primary', async () => {
    const s = set();
    const url = s.url();
    const name = uniqueName('failover');
    const q = new Queue(name, { connection: url });
    closers.push(() => q.close());
    const completions: { id: string; at: number }[] = [];
    const w = new Worker(name, async (job: Job) => {
      await new Promise((r) => setTimeout(r, 5));
      return job.data;
    }, { connection: url, concurrency: 4, blockTimeout: 500, lockDuration: 2000, stalledInterval: 500, promotionInterval: 200 });
    w.on('completed', (job: Job) => completions.push({ id: job.id, at: Date.now() }));
    const errors: string[] = [];
    w.on('error', (e: Error) => errors.push(e.message));
    closers.push(() => w.close());

    const oldPrimary = await s.primary();
    const before: string[] = [];
    for (let i = 0; i < 60; i++) before.push((await q.add('before', { i })).id);
    // acknowledged by the replica too (replication is asynchronous; a failover keeps what it has)
    const direct = oldPrimary.client();
    closers.push(async () => direct.disconnect());
    expect(await direct.call('WAIT', '1', '5000')).to.equal(1);
    await waitFor(() => completions.length >= 10, 'the worker under way');

    const newPrimary = await s.failover();
    const switchedAt = Date.now();
    expect(newPrimary.port).to.not.equal(oldPrimary.port);
    const after: string[] = [];
    for (let i = 0; i < 60; i++) after.push((await q.add('after', { i })).id);

    const done = async () => {
      const ids = new Set(await q.client.zrange(q.keys.completed, '0', '-1'));
      return [...before, ...after].every((id) => ids.has(id));
    };
    await waitFor(done, 'every job added before and after the failover to complete', 30000, 100);
    expect(remotePort(q.client)).to.equal(newPrimary.port);
    expect(w.isRunning()).to.equal(true);
    expect(completions.filter((c) => c.at > switchedAt).length, 'completions by the same worker after the failover').to.be.greaterThan(0);
    const counts = await q.getJobCounts();
    expect(counts.waiting + counts.active + counts.failed).to.equal(0);
  });
});
