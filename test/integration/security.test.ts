/**
 * Security for the library: a rediss:// connection to a TLS-only valkey-server with a certificate
 * from a throwaway CA, and an ACL user restricted to glidemq's keys and commands (the exact line the
 * README documents) that can run a worker and a producer but nothing dangerous.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { readyCheckWithoutKeyspace, type ConnectionInput } from '../../src/engine/connecting/connection.js';
import { LibraryVersionError } from '../../src/engine/shared/errors.js';
import { installLibrary } from '../../src/engine/connecting/library.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { useTlsServer } from '../helpers/tls.js';
import { documentedAclRules } from '../helpers/acl.js';
import { uniqueQueue } from '../helpers/engine.js';

async function roundTrip(connection: ConnectionInput, jobs = 10): Promise<number> {
  const name = uniqueQueue('sec');
  const queue = new Queue(name, { connection });
  const done = new Set<string>();
  const worker = new Worker(name, async (job) => {
    await job.updateProgress(50);
    await job.log('step');
    done.add(job.id);
    return { ok: job.id };
  }, { connection, concurrency: 2, blockTimeout: 500 });
  try {
    await queue.add('plain', {});
    await queue.add('prio', {}, { priority: 2 });
    await queue.add('lifo', {}, { lifo: true });
    await queue.add('later', {}, { delay: 20 });
    await queue.addBulk(Array.from({ length: jobs - 4 }, (_, i) => ({ name: 'bulk', data: { i } })));
    await waitFor(async () => (await queue.getJobCounts()).completed === jobs, `${jobs} jobs completed`);
    return done.size;
  } finally {
    await worker.close();
    await queue.close();
  }
}

describe('security: TLS', function () {
  this.timeout(60000);
  const tls = useTlsServer();

  it('a worker and a producer work over rediss:// with the CA given as tlsCa', async () => {
    expect(await roundTrip({ url: tls().url, tlsCa: tls().certs.caCert })).to.equal(10);
  });

  it('valkeys:// with a host name checks the certificate against that name', async () => {
    expect(await roundTrip({ url: `valkeys://localhost:${tls().port}`, tlsCa: tls().certs.caCert }, 5)).to.equal(5);
  });

  it('a certificate from an unknown CA is refused, not silently accepted', async () => {
    const name = uniqueQueue('sec');
    const queue = new Queue(name, {
      connection: { url: tls().url, tlsCa: tls().certs.otherCaCert, options: { maxRetriesPerRequest: 1, retryStrategy: (n) => (n > 1 ? null : 50) } },
    });
    let err: unknown;
    await queue.add('x', {}).catch((e) => (err = e));
    await queue.close();
    expect(String(err)).to.match(/Connection is closed|max retries|certificate/i);
    const admin = tls().client();
    await admin.connect();
    expect(await admin.keys(`*${name}*`)).to.deep.equal([]);
    admin.disconnect();
  });

  it('an unreadable CA file is a clear error naming the file', async () => {
    expect(() => new Queue('x', { connection: { url: tls().url, tlsCa: '/nonexistent/ca.pem' } })).to.throw(/\/nonexistent\/ca\.pem.*ENOENT/);
  });
});

describe('security: a restricted ACL user', function () {
  this.timeout(60000);
  const server = useServer();
  const rules = documentedAclRules();
  let admin: Redis;
  const base = () => `127.0.0.1:${server().port}`;

  before(async () => {
    admin = server().client();
    await admin.call('ACL', 'SETUSER', 'glidemq', 'reset', 'on', '>s3cret-Pass', ...rules);
    await installLibrary(admin); // the documented user may not FUNCTION LOAD: an administrator installs
  });
  after(async () => {
    admin.disconnect();
  });

  it('the documented rules keep keys to the prefix and leave out dangerous commands', () => {
    expect(rules).to.include('~glide:*');
    expect(rules).to.include('-@all');
    expect(rules.filter((r) => r.startsWith('+@'))).to.deep.equal([]); // named commands only
    expect(rules.filter((r) => r.startsWith('~'))).to.deep.equal(['~glide:*']);
    expect(rules).not.to.include('+@all');
  });

  it('runs a worker and a producer with the password in the URL', async () => {
    expect(await roundTrip(`redis://glidemq:s3cret-Pass@${base()}`)).to.equal(10);
  });

  it('runs a worker and a producer with the password from $GLIDEMQ_PASSWORD', async () => {
    const before = process.env.GLIDEMQ_PASSWORD;
    process.env.GLIDEMQ_PASSWORD = 's3cret-Pass';
    try {
      expect(await roundTrip(`redis://glidemq@${base()}`)).to.equal(10);
    } finally {
      if (before === undefined) delete process.env.GLIDEMQ_PASSWORD;
      else process.env.GLIDEMQ_PASSWORD = before;
    }
  });

  it('after an admin flushed the functions, the user is told an administrator must install them, and works once one did', async () => {
    await admin.call('FUNCTION', 'FLUSH', 'SYNC');
    let err: unknown;
    await roundTrip(`redis://glidemq:s3cret-Pass@${base()}`, 5).catch((e) => (err = e));
    expect(err).to.be.instanceOf(LibraryVersionError);
    expect((err as LibraryVersionError).code).to.equal('ERR_LIBRARY_NOT_INSTALLED');
    await installLibrary(admin);
    expect(await roundTrip(`redis://glidemq:s3cret-Pass@${base()}`, 5)).to.equal(5);
  });

  it('refuses FLUSHALL, CONFIG, KEYS, EVAL, FUNCTION DELETE/FLUSH, MOVE, COPY ... DB, RANDOMKEY, DBSIZE, INFO keyspace and keys outside the prefix', async () => {
    await admin.set('not-glidemq', 'keep');
    const user = new Redis(`redis://glidemq:s3cret-Pass@${base()}`, { maxRetriesPerRequest: 0 });
    readyCheckWithoutKeyspace(user); // (the role may not read a bare INFO)
    user.on('error', () => undefined);
    const refused: string[] = [];
    const attempts: (string | number)[][] = [
      ['FLUSHALL'], ['FLUSHDB'], ['CONFIG', 'GET', 'appendonly'], ['CONFIG', 'SET', 'appendonly', 'no'], ['KEYS', '*'],
      ['EVAL', 'return 1', 0], ['FUNCTION', 'DELETE', 'glidemq'], ['FUNCTION', 'FLUSH', 'SYNC'], ['SCRIPT', 'FLUSH'],
      ['GET', 'not-glidemq'], ['SET', 'not-glidemq', 'x'], ['DEL', 'not-glidemq'], ['DEBUG', 'SLEEP', 0], ['SHUTDOWN'],
      ['CLIENT', 'KILL', 'ID', 1], ['ACL', 'LIST'], ['MOVE', 'glide:{q}:meta', 1], ['COPY', 'glide:{q}:meta', 'glide:{q}:x', 'DB', 1],
      ['SWAPDB', 0, 1], ['RANDOMKEY'], ['DBSIZE'], ['INFO', 'keyspace'], ['INFO'], ['SUBSCRIBE', 'chan'],
    ];
    for (const cmd of attempts) {
      try {
        await user.call(String(cmd[0]), ...cmd.slice(1));
      } catch (err) {
        // DEBUG is also off on this server; either way it must not run
        if (/NOPERM|no permissions|not allowed/i.test(String(err))) refused.push(cmd.join(' '));
      }
    }
    user.disconnect();
    expect(refused).to.deep.equal(attempts.map((c) => c.join(' ')));
    expect(await admin.get('not-glidemq')).to.equal('keep');
    expect(await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'glidemq')).to.have.length(1);
  });
});
