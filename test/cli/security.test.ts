/**
 * Security for the CLI: rediss:// with --tls-ca or $GLIDEMQ_TLS_CA, clear one-line refusals for an
 * untrusted certificate or a wrong password, an ACL user (the README's line) that can enqueue and
 * run a worker, and no password ever in any output: shown as `user:***@`.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { useServer } from '../helpers/valkey.js';
import { useTlsServer } from '../helpers/tls.js';
import { documentedAclRules } from '../helpers/acl.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { fixturePath } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { installLibrary } from '../../src/engine/connecting/library.js';
import { inParallel } from '../helpers/parallel.js';

const SECRET = 'Tr0ub4dor-and-3';

function oneLine(r: CliResult): string {
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).to.have.length(1);
  return lines[0];
}

function noSecret(r: CliResult): void {
  expect(r.stdout + r.stderr, 'output shows the password').not.to.contain(SECRET);
}

describe('cli security: TLS', function () {
  this.timeout(60000);
  const tls = useTlsServer();

  it('enqueue, stats and a worker run over rediss:// with --tls-ca', async () => {
    const q = uniqueQueue('tls');
    const add = await runCli(['-u', tls().url, '--tls-ca', tls().certs.caCert, 'enqueue', q, '{"n":1}']);
    expect(add.code, add.stderr).to.equal(0);
    const work = await runCli(['-u', tls().url, '--tls-ca', tls().certs.caCert, '--json', 'worker', fixturePath('processors', 'echo.mjs'), '--queue', q, '--max-jobs', '1']);
    expect(work.code, work.stderr).to.equal(0);
    expect(JSON.parse(work.stdout.trim()).status).to.equal('completed');
    const stats = await runCli(['-u', tls().url, '--json', 'stats', q], { env: { GLIDEMQ_TLS_CA: tls().certs.caCert } });
    expect(stats.code, stats.stderr).to.equal(0);
    expect(JSON.parse(stats.stdout).completed).to.equal(1);
  });

  it('an untrusted certificate is exit 2 with one line that says so', async () => {
    await inParallel([[], ['--tls-ca', tls().certs.otherCaCert]], async (extra) => {
      const r = await runCli(['-u', tls().url, ...extra, 'stats', 'q']);
      expect(r.code).to.equal(2);
      expect(oneLine(r)).to.match(/TLS certificate is not trusted.*--tls-ca/);
    });
  });

  it('a missing CA file and --tls-ca on a plain URL are usage errors', async () => {
    const missing = await runCli(['-u', tls().url, '--tls-ca', '/nonexistent/ca.pem', 'stats', 'q']);
    expect(missing.code).to.equal(2);
    expect(oneLine(missing)).to.match(/\/nonexistent\/ca\.pem.*ENOENT/);
    const plain = await runCli(['-u', `redis://127.0.0.1:${tls().port}`, '--tls-ca', tls().certs.caCert, 'stats', 'q']);
    expect(plain.code).to.equal(2);
    expect(oneLine(plain)).to.match(/--tls-ca is for TLS servers/);
  });

  it('a plain redis:// URL against the TLS port is exit 2 with a hint', async () => {
    const r = await runCli(['-u', `redis://127.0.0.1:${tls().port}`, 'stats', 'q']);
    expect(r.code).to.equal(2);
    expect(oneLine(r)).to.match(/cannot reach/);
  });
});

describe('cli security: rediss:// against a plain port', function () {
  this.timeout(60000);
  const server = useServer();

  it('is exit 2 with one line saying the server may not speak TLS there', async () => {
    const r = await runCli(['-u', `rediss://127.0.0.1:${server().port}`, 'stats', 'q']);
    expect(r.code).to.equal(2);
    expect(oneLine(r)).to.match(/no TLS handshake .*may not speak TLS \(a plain port needs redis:\/\/\)/);
  });
});

describe('cli security: passwords and a restricted ACL user', function () {
  this.timeout(60000);
  const server = useServer();
  let admin: Redis;
  const host = () => `127.0.0.1:${server().port}`;
  const url = () => `redis://glidemq:${SECRET}@${host()}`;

  before(async () => {
    admin = server().client();
    await admin.call('ACL', 'SETUSER', 'glidemq', 'reset', 'on', `>${SECRET}`, ...documentedAclRules());
    await installLibrary(admin); // the documented user may not FUNCTION LOAD: an administrator installs
  });
  after(async () => {
    admin.disconnect();
  });

  it('enqueue and a worker run as the ACL user, password in the URL or in $GLIDEMQ_PASSWORD', async () => {
    const q = uniqueQueue('acl');
    const inUrl = await runCli(['-u', url(), '--json', 'enqueue', q, '{"a":1}']);
    expect(inUrl.code, inUrl.stderr).to.equal(0);
    noSecret(inUrl);
    const env = { GLIDEMQ_PASSWORD: SECRET };
    const viaEnv = await runCli(['-u', `redis://glidemq@${host()}`, 'enqueue', q, '--priority', '3'], { env });
    expect(viaEnv.code, viaEnv.stderr).to.equal(0);
    const work = await runCli(['-u', `redis://glidemq@${host()}`, 'worker', fixturePath('processors', 'echo.mjs'), '--queue', q, '--exit-when-idle'], { env });
    expect(work.code, work.stderr).to.equal(0);
    noSecret(work);
    expect(Number(await admin.zcard(`glide:{${q}}:completed`))).to.equal(2);
  });

  it('no output of the inspecting commands shows the password', async () => {
    const q = uniqueQueue('acl');
    await runCli(['-u', url(), 'enqueue', q, '{}']);
    await inParallel([['stats', q], ['--json', 'stats', q], ['job', q, '1'], ['queues'], ['pel', q], ['--json', 'reclaim', q], ['heal', '--verbose', q], ['audit'], ['--json', 'audit']], async (args) => {
      const r = await runCli(['-u', url(), ...args]);
      noSecret(r);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.be.oneOf([0, 1]);
    });
  });

  it('a wrong password is exit 2 with one line, the URL shown as user:***@', async () => {
    const r = await runCli(['-u', `redis://glidemq:wrong-${SECRET}@${host()}`, 'stats', 'q']);
    expect(r.code).to.equal(2);
    const line = oneLine(r);
    expect(line).to.match(/authentication failed/i);
    expect(line).to.contain(`glidemq:***@${host()}`);
    noSecret(r);
  });

  it('errors that name the server show user:***@ and never the password', async () => {
    const unknown = await runCli(['-u', url(), 'pel', 'no-such-queue']);
    expect(unknown.code).to.equal(2);
    expect(oneLine(unknown)).to.contain(`glidemq:***@${host()}`);
    noSecret(unknown);
    const badUrl = await runCli(['-u', `redis://glidemq:${SECRET}@${host()}/notadb`, 'stats', 'q']);
    expect(badUrl.code).to.equal(2);
    noSecret(badUrl);
    const down = await runCli(['-u', `redis://glidemq:${SECRET}@127.0.0.1:1`, 'stats', 'q']);
    expect(down.code).to.equal(2);
    expect(oneLine(down)).to.contain('glidemq:***@127.0.0.1:1');
    noSecret(down);
  });
});
