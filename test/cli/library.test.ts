/**
 * `glidemq library status` / `glidemq library install`, and the CLI run as the README's role users:
 * a producer on a server without the library is told to ask an administrator, the administrator
 * installs it, the producer, worker and operator then do their jobs; a swapped library is reported,
 * refused by every command, failed by the audit and replaced by the install.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { LIBRARY_CODE, LIBRARY_CODE_SHA256, LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION } from '../../src/engine/connecting/library.js';
import { createRoleUser, type Role } from '../helpers/acl.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { fixturePath } from '../helpers/fixtures.js';
import { useServer } from '../helpers/valkey.js';

const PASSWORD = 'Cli-role-s3cret';

function oneLine(r: CliResult): string {
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).to.have.length(1);
  return lines[0];
}

describe('glidemq library (CLI)', function () {
  this.timeout(60000);
  const server = useServer();
  let admin: Redis;
  const as = (role: Role) => `redis://glidemq-${role}:${PASSWORD}@127.0.0.1:${server().port}`;
  const cli = (role: Role | undefined, args: string[]) => runCli(['-u', role ? as(role) : server().url, ...args]);

  before(async () => {
    admin = server().client();
    for (const role of ['admin', 'producer', 'worker', 'operator'] as const) await createRoleUser(admin, role, `glidemq-${role}`, PASSWORD);
  });
  beforeEach(async () => {
    await admin.call('FUNCTION', 'FLUSH', 'SYNC');
  });
  after(() => admin.quit());

  it('--help explains the commands with examples', async () => {
    const r = await runCli(['library', 'install', '--help']);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.match(/FUNCTION LOAD/).and.match(/Examples:/).and.match(/--force/);
    const s = await runCli(['library', 'status', '--help']);
    expect(s.stdout).to.match(/Exit codes: 0 .* 1 .* 2/s);
  });

  it('without the library: status exits 1, the producer is told to ask an administrator, who installs it; then every role works', async () => {
    const missing = await cli('operator', ['library', 'status']);
    expect(missing.code, missing.stderr).to.equal(1);
    expect(missing.stdout).to.match(/missing/).and.contain(`127.0.0.1:${server().port}`);

    const q = uniqueQueue('roles');
    const refused = await cli('producer', ['enqueue', q, '{}']);
    expect(refused.code).to.equal(2);
    expect(oneLine(refused)).to.contain(`is not installed on 127.0.0.1:${server().port} and this user may not load it`)
      .and.contain(`glidemq library install --url redis://127.0.0.1:${server().port}`)
      .and.not.contain(PASSWORD);
    const notAdmin = await cli('worker', ['library', 'install']);
    expect(notAdmin.code).to.equal(2);
    expect(oneLine(notAdmin)).to.match(/may not FUNCTION LOAD on 127\.0\.0\.1:\d+: run the install as an administrator/);

    const install = await cli('admin', ['library', 'install']);
    expect(install.code, install.stderr).to.equal(0);
    expect(install.stdout).to.match(/installed library/).and.contain(LIBRARY_VERSION);
    const again = await cli('admin', ['--json', 'library', 'install']);
    expect(again.code, again.stderr).to.equal(0);
    const doc = JSON.parse(again.stdout);
    expect(doc.library).to.deep.equal({ version: LIBRARY_VERSION, package: LIBRARY_PACKAGE_VERSION, codeSha256: LIBRARY_CODE_SHA256 });
    expect(doc.nodes.map((n: { action: string; state: string }) => [n.action, n.state])).to.deep.equal([['unchanged', 'current']]);

    for (const data of ['{"n":1}', '{"n":2}']) {
      const add = await cli('producer', ['enqueue', q, data]);
      expect(add.code, add.stderr).to.equal(0);
    }
    const work = await cli('worker', ['--json', 'worker', fixturePath('processors', 'echo.mjs'), '--queue', q, '--exit-when-idle']);
    expect(work.code, work.stderr).to.equal(0);
    expect(work.stdout.trim().split('\n').map((l) => JSON.parse(l).status)).to.deep.equal(['completed', 'completed']);

    const stats = await cli('operator', ['--json', 'stats', q]);
    expect(stats.code, stats.stderr).to.equal(0);
    expect(JSON.parse(stats.stdout).completed).to.equal(2);
    for (const args of [['pause', q], ['resume', q], ['heal', '--verbose', q], ['--json', 'reclaim', q], ['pel', q], ['queues'], ['job', q, '1']]) {
      const r = await cli('operator', args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(0);
    }
    const status = await cli('operator', ['--json', 'library', 'status']);
    expect(status.code, status.stderr).to.equal(0);
    expect(JSON.parse(status.stdout).nodes).to.deep.equal([{
      address: `127.0.0.1:${server().port}`, state: 'current', version: LIBRARY_VERSION, package: LIBRARY_PACKAGE_VERSION,
      codeSha256: LIBRARY_CODE_SHA256, codeMatches: true,
    }]);
    const audit = await cli('operator', ['--json', 'audit']);
    const checks = new Map(JSON.parse(audit.stdout).nodes[0].checks.map((c: { id: string; status: string }) => [c.id, c.status]));
    expect(checks.get('function-library')).to.equal('pass');
    expect(checks.get('acl-function-users')).to.equal('unknown'); // the operator may not read ACL LIST
    const full = await cli(undefined, ['--json', 'audit']);
    const users = JSON.parse(full.stdout).nodes[0].checks.find((c: { id: string }) => c.id === 'acl-function-users');
    expect(users.status).to.equal('warn');
    expect(users.actual).to.equal('glidemq-admin (load)');
  });

  it('a swapped library: status and audit report it, every command refuses it, install replaces it', async () => {
    await admin.call('FUNCTION', 'LOAD', `${LIBRARY_CODE}\n-- one line more: the same version string, other code\n`);
    const status = await cli('operator', ['library', 'status']);
    expect(status.code).to.equal(1);
    expect(status.stdout).to.match(/swapped/).and.match(/no/);
    const stats = await cli(undefined, ['stats', uniqueQueue('swap')]);
    expect(stats.code).to.equal(2);
    expect(oneLine(stats)).to.match(/reports this client's version .* code differs .*`glidemq library install/);
    const audit = await cli(undefined, ['audit']);
    expect(audit.code).to.equal(1);
    expect(audit.stdout).to.match(/fail\s+function-library/); // one line per check: status, check, actual
    const install = await cli('admin', ['library', 'install']);
    expect(install.code, install.stderr).to.equal(0);
    expect(install.stdout).to.match(/replaced library .* before: swapped/);
    expect((await cli(undefined, ['stats', uniqueQueue('swap')])).code).to.equal(0);
  });

  it('a library from a newer glidemq is replaced only with --force', async () => {
    const newer = LIBRARY_CODE.replace(/"package":"[^"]+"/, '"package":"99.0.0"').replace(/"version":"[0-9a-f]+"/, '"version":"ffffffffffffffff"');
    await admin.call('FUNCTION', 'LOAD', newer);
    const refused = await cli('admin', ['library', 'install']);
    expect(refused.code).to.equal(2);
    expect(oneLine(refused)).to.match(/newer than this glidemq .* --force/);
    const forced = await cli('admin', ['library', 'install', '--force']);
    expect(forced.code, forced.stderr).to.equal(0);
    expect(forced.stdout).to.match(/before: newer/);
  });
});
