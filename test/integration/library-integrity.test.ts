/**
 * The library cannot be swapped, and least privilege is real (README "ACL roles"):
 * - a user allowed to FUNCTION LOAD loads a `glidemq` library with this build's version string and
 *   other code; an administrator's client refuses it before running any of it, the audit fails on
 *   it, and `installLibrary` puts the real one back;
 * - the producer, worker, operator and administrator users, built from exactly the README's lines,
 *   each do their job and are refused the commands their role leaves out;
 * - a user that may not FUNCTION LOAD, on a server without the library (or with an older one), is
 *   told that an administrator must install it, and works once one did.
 */
import { expect } from 'chai';
import { Cluster, Redis } from 'ioredis';
import { runAudit } from '../../src/audit/audit.js';
import { LibraryVersionError } from '../../src/engine/shared/errors.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import {
  installLibrary, LIBRARY_CODE, LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION, libraryStatus,
} from '../../src/engine/connecting/library.js';
import { MaintenanceSession } from '../../src/engine/administering/maintenance.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { createRoleUser, ROLES, documentedClusterRules, documentedRoleRules, isNoPerm, libraryCommands, rulesAllow, type Role } from '../helpers/acl.js';
import { readyCheckWithoutKeyspace } from '../../src/engine/connecting/connection.js';
import { useCluster } from '../helpers/cluster.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';

const PASSWORD = 'Role-s3cret';
const USER: Record<Role, string> = { admin: 'glidemq-admin', producer: 'glidemq-producer', worker: 'glidemq-worker', operator: 'glidemq-operator', monitor: 'glidemq-monitor' };
/** The old README's single application user: it may FUNCTION LOAD, which is what the attack needs. */
const LOADER_RULES = '~glide:* resetchannels -@all +@read +@write -@dangerous +fcall +fcall_ro +function|load +function|list +time +info +client|setinfo'.split(' ');

/**
 * This build's library with changed code and the same version string: glidemq_version still answers
 * this build's JSON, and one more function copies any key to any other with the caller's rights.
 */
function swappedLibrary(): string {
  return `${LIBRARY_CODE}\nredis.register_function('glidemq_copyAnything', function(keys) return redis.call('COPY', keys[1], keys[2]) end)\n`;
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

/** Each command, run as `user`: the ones refused for lack of permission. */
async function refusedOf(user: Redis, commands: (string | number)[][]): Promise<string[]> {
  const refused: string[] = [];
  for (const cmd of commands) {
    try {
      await user.call(String(cmd[0]), ...cmd.slice(1));
    } catch (err) {
      if (isNoPerm(err)) refused.push(cmd.join(' '));
    }
  }
  return refused;
}

describe('library integrity and ACL roles', function () {
  this.timeout(60000);
  const server = useServer();
  let admin: Redis;
  const url = (user: string) => `redis://${user}:${PASSWORD}@127.0.0.1:${server().port}`;
  const connect = (user: string) => {
    const c = new Redis(url(user), { maxRetriesPerRequest: 0 });
    readyCheckWithoutKeyspace(c); // (the roles may not read a bare INFO)
    c.on('error', () => undefined);
    return c;
  };
  const closing: { close(): Promise<unknown> }[] = [];
  /** A queue as the role user, or as the server's default user (the harness's administrator). */
  const queue = (user: string | undefined, name: string) => {
    const q = new Queue(name, { connection: user === undefined ? server().url : url(user) });
    closing.push(q);
    return q;
  };

  before(async () => {
    admin = server().client();
    for (const role of ROLES) await createRoleUser(admin, role, USER[role], PASSWORD);
    await admin.call('ACL', 'SETUSER', 'loader', 'reset', 'on', `>${PASSWORD}`, ...LOADER_RULES);
  });
  beforeEach(async () => {
    await admin.call('FUNCTION', 'FLUSH', 'SYNC');
  });
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((c) => c.close()));
  });
  after(() => admin.quit());

  describe('a swapped library', () => {
    it('is refused by an administrator\'s client before any of it runs, fails the audit, and is replaced by library install', async () => {
      const loader = connect('loader');
      await loader.call('FUNCTION', 'LOAD', swappedLibrary());
      loader.disconnect();
      // It answers exactly like this build's library: only its code tells it apart.
      expect(JSON.parse(String(await admin.call('FCALL_RO', 'glidemq_version', '0')))).to.deep.equal({ version: LIBRARY_VERSION, package: LIBRARY_PACKAGE_VERSION });

      const name = uniqueQueue('swap');
      const err = await caught(queue(undefined, name).add('x', {}));
      expect(err).to.be.instanceOf(LibraryVersionError);
      expect((err as LibraryVersionError).code).to.equal('ERR_LIBRARY_MISMATCH');
      expect((err as Error).message)
        .to.contain(`127.0.0.1:${server().port}`)
        .and.contain(LIBRARY_VERSION)
        .and.match(/code differs/)
        .and.match(/glidemq library install/)
        .and.match(/FUNCTION LOAD/);
      // Refused before the first function call: the queue has no key at all.
      expect(await admin.keys(`glide:{${name}}:*`)).to.deep.equal([]);

      // A role user's client refuses it the same way.
      const worker = await caught(queue(USER.worker, uniqueQueue('swap')).getJobCounts());
      expect((worker as LibraryVersionError).code).to.equal('ERR_LIBRARY_MISMATCH');

      const report = await runAudit({ url: server().url, cluster: false }, { expectedLibraryVersion: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION });
      const checks = new Map(report.nodes[0].checks.map((c) => [c.id, c]));
      expect(checks.get('function-library')!.status).to.equal('fail');
      expect(checks.get('function-library')!.actual).to.match(/code differs/);
      expect(checks.get('function-library')!.message).to.match(/glidemq library install/);
      const holders = checks.get('acl-function-users')!;
      expect(holders.status).to.equal('warn');
      expect(holders.actual).to.contain('loader (load, delete, flush, restore)').and.contain(`${USER.admin} (load)`);
      expect(holders.actual).not.to.match(/glidemq-(producer|worker|operator)|default/);

      const status = await libraryStatus(admin);
      expect(status.map((n) => n.state)).to.deep.equal(['swapped']);
      const installed = await installLibrary(admin);
      expect(installed.map((r) => [r.before, r.action, r.state])).to.deep.equal([['swapped', 'replaced', 'current']]);
      expect((await installLibrary(admin)).map((r) => r.action)).to.deep.equal(['unchanged']);
      await queue(undefined, name).add('x', {});
      expect((await libraryStatus(admin)).map((n) => n.state)).to.deep.equal(['current']);
    });

    it('a library named glidemq that declares no version is refused too', async () => {
      await admin.call('FUNCTION', 'LOAD', "#!lua name=glidemq\nredis.register_function('glidemq_add', function() return 1 end)");
      const err = await caught(queue(undefined, uniqueQueue('foreign')).add('x', {}));
      expect((err as LibraryVersionError).code).to.equal('ERR_LIBRARY_MISMATCH');
      expect((err as Error).message).to.match(/declares no glidemq version/);
    });
  });

  describe('the documented roles', () => {
    it('the lines keep every role to the prefix, and only the administrator may FUNCTION LOAD', () => {
      for (const role of ['producer', 'worker', 'operator'] as const) {
        const rules = documentedRoleRules(role);
        expect(rules.filter((r) => r.startsWith('~')), role).to.deep.equal(['~glide:*']);
        expect(rules, role).to.include.members(['-@all', '+fcall', '+function|list', '+info|replication']);
        // exactly named commands: no category (+@write would bring MOVE and COPY ... DB, +@read RANDOMKEY)
        expect(rules.filter((r) => r.startsWith('+@')), role).to.deep.equal([]);
        expect(rules.join(' '), role).not.to.match(/function\|load|allcommands|\+info( |$)|\+(move|copy|swapdb|randomkey|dbsize|keys|rename)\b/);
      }
      expect(documentedRoleRules('admin')).to.include('+function|load').and.not.to.satisfy((r: string[]) => r.some((x) => x.startsWith('~')));
    });

    it('every role that calls the functions is allowed every command they run (but the reads its role forgoes)', async () => {
      const used = libraryCommands((await admin.call('COMMAND', 'LIST')) as string[]);
      expect(used).to.include.members(['hset', 'xadd', 'incrby', 'time', 'info|replication', 'xgroup|create', 'xreadgroup', 'scan']);
      const forgoes: Record<'producer' | 'worker' | 'operator', string[]> = {
        producer: ['xreadgroup', 'scan'], // takes no jobs; no keyspace listing
        worker: [],
        operator: ['xreadgroup'], // takes no jobs
      };
      for (const role of ['producer', 'worker', 'operator'] as const) {
        const rules = documentedRoleRules(role);
        const missing = used.filter((c) => !rulesAllow(rules, c) && !forgoes[role].includes(c));
        expect(missing, role).to.deep.equal([]);
      }
    });

    it('the administrator installs the library and can do nothing else with the data', async () => {
      const a = connect(USER.admin);
      try {
        const installed = await installLibrary(a);
        expect(installed.map((r) => [r.before, r.action])).to.deep.equal([['missing', 'installed']]);
        expect((await libraryStatus(a)).map((n) => n.state)).to.deep.equal(['current']);
        const forbidden = [
          ['GET', 'glide:{q}:meta'], ['SET', 'glide:{q}:meta', 'x'], ['FCALL_RO', 'glidemq_version', 0], ['FLUSHALL'],
          ['CONFIG', 'SET', 'appendonly', 'no'], ['FUNCTION', 'DELETE', 'glidemq'], ['FUNCTION', 'FLUSH', 'SYNC'], ['KEYS', '*'],
        ];
        expect(await refusedOf(a, forbidden)).to.deep.equal(forbidden.map((c) => c.join(' ')));
      } finally {
        a.disconnect();
      }
    });

    it('a producer adds jobs, a worker processes them, an operator inspects, pauses, heals and reclaims', async () => {
      await installLibrary(admin);
      const name = uniqueQueue('roles');
      const producer = queue(USER.producer, name);
      await producer.add('plain', { n: 1 });
      await producer.add('prio', {}, { priority: 3 });
      await producer.add('lifo', {}, { lifo: true });
      await producer.add('later', {}, { delay: 50 });
      await producer.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'bulk', data: { i } })));
      expect((await producer.getJob((await producer.add('one-more', { k: 'v' })).id))?.data).to.deep.equal({ k: 'v' });
      const total = 11;

      const operator = queue(USER.operator, name);
      expect(await operator.pause()).to.equal(true);
      expect((await operator.getJobCounts()).isPaused).to.equal(true);
      expect(await operator.resume()).to.equal(true);

      const done: string[] = [];
      const worker = new Worker(name, async (job) => {
        done.push(job.id);
        await job.updateProgress(50);
        return { ok: true };
      }, { connection: url(USER.worker), concurrency: 2, blockTimeout: 500 });
      worker.on('error', () => undefined);
      closing.push(worker);
      await waitFor(async () => (await operator.getJobCounts()).completed === total, `${total} jobs completed`);
      expect(new Set(done).size).to.equal(total);

      const session = await MaintenanceSession.open({ url: url(USER.operator), cluster: false }, 'glide');
      try {
        const m = session.queue(name);
        const reclaimed = await m.reclaim();
        expect(reclaimed.redispatched).to.deep.equal([]);
        const healed = await m.heal();
        expect(healed.drift).to.equal(false);
      } finally {
        await session.close();
      }
    });

    it('a monitor reads counts, listings, jobs and metrics, and cannot change a queue, not even through the functions', async () => {
      await installLibrary(admin);
      const name = uniqueQueue('monitor');
      const owner = queue(undefined, name);
      const waiting = await owner.add('plain', { n: 1 });
      await owner.add('later', {}, { delay: 60_000 });
      await owner.add('grouped', {}, { group: { id: 'g1' } });
      const monitor = queue(USER.monitor, name);
      const counts = await monitor.getJobCounts('waiting', 'delayed');
      expect(counts).to.deep.include({ waiting: 2, delayed: 1 });
      expect((await monitor.getJobs(['waiting', 'delayed'])).map((j) => j.name).sort()).to.deep.equal(['grouped', 'later', 'plain']);
      expect((await monitor.getJob(waiting.id))?.data).to.deep.equal({ n: 1 });
      expect((await monitor.getMetrics()).completed).to.equal(0);
      expect(await monitor.getJobState(waiting.id)).to.equal('waiting');

      expect(isNoPerm(await caught(monitor.add('x', {}))), 'add').to.equal(true);
      expect(isNoPerm(await caught(monitor.pause())), 'pause').to.equal(true);
      const c = connect(USER.monitor);
      try {
        // A function that writes is refused under FCALL_RO by the server itself, whatever its arguments.
        const drain = await caught(c.call('FCALL_RO', 'glidemq_drain', 1, new QueueKeys(name, 'glide').meta, '1'));
        expect(String(drain)).to.match(/write flag|no-writes|not allowed|_ro/i);
        expect(isNoPerm(await caught(c.call('FCALL', 'glidemq_getCounts', 1, new QueueKeys(name, 'glide').meta)))).to.equal(true);
      } finally {
        c.disconnect();
      }
      expect((await owner.getJobCounts('waiting', 'delayed'))).to.deep.include({ waiting: 2, delayed: 1 });

      // a flow, as `glidemq flow` and a dashboard read it
      const flows = new FlowProducer({ connection: server().url });
      closing.push(flows);
      const tree = await flows.add({ name: 'parent', queueName: name, children: [{ name: 'child', queueName: name }] });
      const reader = new FlowProducer({ connection: url(USER.monitor) });
      closing.push(reader);
      const read = await reader.getFlow({ id: tree.job.id, queueName: name });
      expect(read?.children?.map((c) => c.job.name)).to.deep.equal(['child']);
      const parent = (await monitor.getJob(tree.job.id))!;
      expect(await parent.getDependenciesCount()).to.deep.include({ unprocessed: 1 });
      expect((await parent.getDependencies({ unprocessed: { count: 10 } })).unprocessed).to.have.length(1);
    });

    it('each role is refused what it does not need', async () => {
      await installLibrary(admin);
      await admin.set('not-glidemq', 'keep');
      const stream = new QueueKeys(uniqueQueue('deny'), 'glide').stream;
      const inPrefix = new QueueKeys(uniqueQueue('deny'), 'glide').meta;
      await admin.hset(inPrefix, 'f', 'v');
      const everyone: (string | number)[][] = [
        ['FUNCTION', 'LOAD', 'REPLACE', LIBRARY_CODE], ['FUNCTION', 'DELETE', 'glidemq'], ['FUNCTION', 'FLUSH', 'SYNC'],
        ['FUNCTION', 'RESTORE', 'x'], ['FLUSHALL'], ['FLUSHDB'], ['CONFIG', 'SET', 'appendonly', 'no'], ['CONFIG', 'GET', 'requirepass'],
        ['EVAL', 'return 1', 0], ['SCRIPT', 'FLUSH'], ['KEYS', '*'], ['GET', 'not-glidemq'], ['DEL', 'not-glidemq'],
        ['ACL', 'LIST'], ['SHUTDOWN'], ['CLIENT', 'KILL', 'ID', 1],
        // out of the database, or reading the whole keyspace: keys ACL cannot scope to the prefix
        ['MOVE', inPrefix, 1], ['COPY', inPrefix, `${inPrefix}-copy`, 'DB', 1], ['COPY', inPrefix, `${inPrefix}-copy`],
        ['SWAPDB', 0, 1], ['SELECT', 1], ['RANDOMKEY'], ['DBSIZE'], ['INFO'], ['INFO', 'keyspace'], ['INFO', 'everything'],
        ['RENAME', inPrefix, `${inPrefix}-renamed`], ['MIGRATE', '127.0.0.1', 1, inPrefix, 0, 1000], ['SORT', inPrefix, 'STORE', `${inPrefix}-sorted`],
        ['OBJECT', 'ENCODING', inPrefix], ['CLIENT', 'LIST'], ['SLOWLOG', 'GET'], ['LATENCY', 'LATEST'], ['MEMORY', 'STATS'],
        ['PUBLISH', 'chan', 'x'], ['WAIT', 0, 0],
      ];
      // Last: a SUBSCRIBE that went through would turn the connection into a subscriber.
      const subscribe = [['SUBSCRIBE', 'chan']];
      // Taking a job needs a blocking-category read: producers and operators cannot take jobs.
      const takeJobs = [['XREADGROUP', 'GROUP', 'workers', 'c', 'COUNT', 1, 'STREAMS', stream, '>']];
      const forbidden: Record<'producer' | 'worker' | 'operator', (string | number)[][]> = {
        producer: [...everyone, ...takeJobs, ['SCAN', 0], ['XREAD', 'STREAMS', stream, '0'], ['UNLINK', inPrefix], ...subscribe],
        worker: [...everyone, ['UNLINK', inPrefix], ...subscribe],
        operator: [...everyone, ...takeJobs, ['XREAD', 'STREAMS', stream, '0'], ['CLIENT', 'ID'], ...subscribe],
      };
      for (const role of ['producer', 'worker', 'operator'] as const) {
        const c = connect(USER[role]);
        try {
          expect(await refusedOf(c, forbidden[role]), role).to.deep.equal(forbidden[role].map((cmd) => cmd.join(' ')));
          // ...and allowed what the library's check needs.
          expect(await c.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'glidemq'), role).to.have.length(1);
        } finally {
          c.disconnect();
        }
      }
      expect(await admin.get('not-glidemq')).to.equal('keep');
      expect(await admin.hgetall(inPrefix)).to.deep.equal({ f: 'v' }); // not moved, copied or renamed
      await admin.select(1);
      expect(await admin.dbsize()).to.equal(0);
      await admin.select(0);
      expect((await libraryStatus(admin)).map((n) => n.state)).to.deep.equal(['current']);
    });
  });

  describe('a user that may not FUNCTION LOAD', () => {
    it('on a server without the library: told that an administrator must install it, and works once one did', async () => {
      const producer = queue(USER.producer, uniqueQueue('noload'));
      const err = await caught(producer.add('x', {}));
      expect(err).to.be.instanceOf(LibraryVersionError);
      expect((err as LibraryVersionError).code).to.equal('ERR_LIBRARY_NOT_INSTALLED');
      expect((err as Error).message).to.equal(
        `the glidemq library ${LIBRARY_VERSION} (glidemq ${LIBRARY_PACKAGE_VERSION}) is not installed on 127.0.0.1:${server().port} and this ` +
          'user may not load it (FUNCTION LOAD is refused): an administrator runs ' +
          `\`glidemq library install --url redis://127.0.0.1:${server().port}\` (README "ACL roles")`,
      );
      expect(await admin.call('FUNCTION', 'LIST')).to.deep.equal([]);

      const a = connect(USER.admin);
      await installLibrary(a);
      a.disconnect();
      const job = await producer.add('x', { after: 'install' });
      expect((await producer.getJob(job.id))?.data).to.deep.equal({ after: 'install' });
    });

    it('on a server with an older library: told the same, and the older library is left alone', async () => {
      const older = LIBRARY_CODE.replace(/"package":"[^"]+"/, '"package":"0.0.1"').replace(/"version":"[0-9a-f]+"/, '"version":"0000000000000000"');
      await admin.call('FUNCTION', 'LOAD', older);
      const err = await caught(queue(USER.worker, uniqueQueue('old')).getJobCounts());
      expect((err as LibraryVersionError).code).to.equal('ERR_LIBRARY_NOT_INSTALLED');
      expect((err as Error).message).to.match(/holds the glidemq library 0000000000000000 from glidemq 0\.0\.1, not this client's .* may not load it .*`glidemq library install/);
      expect((await libraryStatus(admin)).map((n) => [n.state, n.version])).to.deep.equal([['older', '0000000000000000']]);
    });

    it('a user that may not list functions cannot verify the library and is refused', async () => {
      await installLibrary(admin);
      await admin.call('ACL', 'SETUSER', 'blind', 'reset', 'on', `>${PASSWORD}`, ...documentedRoleRules('worker'), '-function|list');
      const err = await caught(queue('blind', uniqueQueue('blind')).add('x', {}));
      expect((err as LibraryVersionError).code).to.equal('ERR_LIBRARY_UNVERIFIED');
      expect((err as Error).message).to.match(/may not run FUNCTION LIST on 127\.0\.0\.1:\d+, so .* cannot be checked .* grant the user function\|list/);
    });
  });
});

describe('library integrity and ACL roles on a cluster', function () {
  this.timeout(90000);
  const cluster = useCluster();
  const closing: { close(): Promise<unknown> }[] = [];
  const roleUrl = (role: Role) => `redis://${USER[role]}:${PASSWORD}@127.0.0.1:${cluster().seedPort}`;

  before(async () => {
    // ACL users live on each node; a role on a cluster adds what the README says a cluster client needs.
    for (const node of cluster().nodes) {
      for (const role of ['admin', 'producer', 'worker'] as const) {
        await cluster().call(node.port, 'ACL', 'SETUSER', USER[role], 'reset', 'on', `>${PASSWORD}`, ...documentedRoleRules(role), ...documentedClusterRules());
      }
    }
    for (const p of await cluster().primaries()) await cluster().call(p.port, 'FUNCTION', 'FLUSH', 'SYNC');
  });
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((c) => c.close()));
  });

  it('install reaches every primary; producer and worker users work; a swap on one primary is found and refused', async () => {
    const primaries = (await cluster().primaries()).map((p) => `127.0.0.1:${p.port}`).sort();
    const producer = new Queue(uniqueQueue('cl'), { connection: { url: roleUrl('producer'), cluster: true } });
    closing.push(producer);
    const before = await caught(producer.add('x', {}));
    expect((before as LibraryVersionError).code).to.equal('ERR_LIBRARY_NOT_INSTALLED');
    expect((before as Error).message).to.match(/glidemq library install --url redis:\/\/127\.0\.0\.1:\d+ --cluster/);

    // (a plain ioredis client: its nodes' ready check would read a bare INFO, which the role may not)
    const admin = new Cluster([{ host: '127.0.0.1', port: cluster().seedPort }], {
      redisOptions: { username: USER.admin, password: PASSWORD, enableReadyCheck: false },
    });
    try {
      const installed = await installLibrary(admin);
      expect(installed.map((r) => [r.address, r.action])).to.deep.equal(primaries.map((a) => [a, 'installed']));
      expect((await installLibrary(admin)).map((r) => r.action)).to.deep.equal(['unchanged', 'unchanged', 'unchanged']);

      const names = Array.from({ length: 6 }, () => uniqueQueue('cl'));
      for (const name of names) {
        const q = new Queue(name, { connection: { url: roleUrl('producer'), cluster: true } });
        closing.push(q);
        await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }]);
      }
      let done = 0;
      for (const name of names) {
        const w = new Worker(name, async () => void done++, { connection: { url: roleUrl('worker'), cluster: true }, blockTimeout: 500 });
        w.on('error', () => undefined);
        closing.push(w);
      }
      await waitFor(() => done === names.length * 2, 'every job of every queue processed');

      const victim = Number(primaries[1].split(':')[1]);
      await cluster().call(victim, 'FUNCTION', 'LOAD', 'REPLACE', swappedLibrary());
      expect((await libraryStatus(admin)).map((n) => n.state)).to.deep.equal(['current', 'swapped', 'current']);
      const refused = await caught(new Queue(uniqueQueue('cl'), { connection: { url: roleUrl('producer'), cluster: true } }).waitUntilReady());
      expect((refused as LibraryVersionError).code).to.equal('ERR_LIBRARY_MISMATCH');
      expect((refused as Error).message).to.contain(primaries[1]);
      expect((await installLibrary(admin)).map((r) => r.action)).to.deep.equal(['unchanged', 'replaced', 'unchanged']);
    } finally {
      admin.disconnect();
    }
  });
});
