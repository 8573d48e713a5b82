/**
 * Connection profiles (src/cli/profiles.ts): the file's place, choosing a profile, the precedence
 * flag > named profile > environment > "default" profile > built-in default, the errors of a bad
 * file; and the --utc time style.
 */
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, useServer } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

describe('glidemq connection profiles (CLI)', function () {
  this.timeout(60000);
  const server = useServer();
  let dir: string;
  let file: string;
  let deadUrl: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'glidemq-profiles-'));
    file = join(dir, 'config.json');
    deadUrl = `redis://127.0.0.1:${await freePort()}`; // nothing listens there
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const writeConfig = (doc: unknown, path = file) => writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc));
  /** Runs the CLI with the profile file of this test and no profile/prefix/URL from the outer environment. */
  const cli = (args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> =>
    runCli(args, { env: { GLIDEMQ_CONFIG: file, GLIDEMQ_PROFILE: undefined, GLIDEMQ_PREFIX: undefined, GLIDEMQ_TLS_CA: undefined, ...env } });

  /** The prefix the job `id` of `queue` was stored under, of the ones given. */
  async function prefixOf(queue: string, id: string, prefixes: string[]): Promise<string[]> {
    const found: string[] = [];
    for (const prefix of prefixes) {
      const q = new Queue(queue, { connection: server().url, prefix });
      try {
        if (await q.getJob(id)) found.push(prefix);
      } finally {
        await q.close();
      }
    }
    return found;
  }

  async function enqueue(args: string[], env: Record<string, string | undefined> = {}): Promise<{ queue: string; id: string; r: CliResult }> {
    const queue = uniqueQueue('cli-profile');
    const r = await cli([...args, 'enqueue', queue, '{}'], env);
    return { queue, id: r.stdout.trim(), r };
  }

  it('--profile picks a named profile: its url and prefix are used', async () => {
    writeConfig({ profiles: { prod: { url: server().url, prefix: 'prodp' }, other: { url: deadUrl } } });
    const { queue, id, r } = await enqueue(['--profile', 'prod']);
    expect(r.code, r.stderr).to.equal(0);
    expect(await prefixOf(queue, id, ['glide', 'prodp'])).to.deep.equal(['prodp']);
    const stats = await cli(['--profile', 'prod', 'stats', queue, '--json']);
    expect(stats.code, stats.stderr).to.equal(0);
    expect(JSON.parse(stats.stdout).waiting).to.equal(1);
  });

  it('$GLIDEMQ_PROFILE picks one too; --profile wins over it', async () => {
    writeConfig({ profiles: { prod: { url: server().url, prefix: 'envp' }, dead: { url: deadUrl } } });
    const a = await enqueue([], { GLIDEMQ_PROFILE: 'prod' });
    expect(a.r.code, a.r.stderr).to.equal(0);
    expect(await prefixOf(a.queue, a.id, ['glide', 'envp'])).to.deep.equal(['envp']);
    const b = await enqueue(['--profile', 'prod'], { GLIDEMQ_PROFILE: 'dead' });
    expect(b.r.code, b.r.stderr).to.equal(0);
  });

  it('the profile named "default" is used when none is named, and only then', async () => {
    writeConfig({ profiles: { default: { url: server().url, prefix: 'defp' }, dead: { url: deadUrl } } });
    const a = await enqueue([]);
    expect(a.r.code, a.r.stderr).to.equal(0);
    expect(await prefixOf(a.queue, a.id, ['glide', 'defp'])).to.deep.equal(['defp']);
    const b = await enqueue(['--profile', 'dead']);
    expect(b.r.code).to.equal(2);
    expect(b.r.stderr).to.match(/cannot reach redis:\/\/127\.0\.0\.1:\d+/);
  });

  it('precedence: flag > named profile > environment > "default" profile > default, setting by setting', async () => {
    writeConfig({ profiles: { p: { url: deadUrl, prefix: 'fromprofile' } } });
    // url: the flag beats the profile; a named profile beats $GLIDEMQ_URL (CLI.md)
    expect((await enqueue(['--profile', 'p', '-u', server().url])).r.code).to.equal(0);
    expect((await enqueue(['--profile', 'p'], { GLIDEMQ_URL: server().url })).r.code).to.equal(2); // the profile's (dead) URL
    expect((await enqueue(['--profile', 'p', '-u', server().url], { GLIDEMQ_URL: deadUrl })).r.code).to.equal(0);
    expect((await enqueue(['--profile', 'p'])).r.code).to.equal(2);
    // prefix: $GLIDEMQ_PREFIX, then the named profile over it, then --prefix over both
    const all = ['glide', 'fromprofile', 'fromenv', 'fromflag'];
    const fromProfile = await enqueue(['--profile', 'p', '-u', server().url], { GLIDEMQ_PREFIX: 'fromenv' });
    expect(await prefixOf(fromProfile.queue, fromProfile.id, all)).to.deep.equal(['fromprofile']);
    // the "default" profile is only a default: the environment wins over it
    writeConfig({ profiles: { default: { url: server().url, prefix: 'fromprofile' } } });
    const fromEnv = await enqueue([], { GLIDEMQ_PREFIX: 'fromenv' });
    expect(await prefixOf(fromEnv.queue, fromEnv.id, all)).to.deep.equal(['fromenv']);
    writeConfig({ profiles: { p: { url: deadUrl, prefix: 'fromprofile' } } });
    const fromFlag = await enqueue(['--profile', 'p', '-u', server().url, '--prefix', 'fromflag'], { GLIDEMQ_PREFIX: 'fromenv' });
    expect(await prefixOf(fromFlag.queue, fromFlag.id, all)).to.deep.equal(['fromflag']);
    // no profile, no environment: the built-in default prefix
    writeConfig({ profiles: {} });
    const plain = await enqueue(['-u', server().url]);
    expect(await prefixOf(plain.queue, plain.id, all)).to.deep.equal(['glide']);
    const envOnly = await enqueue(['-u', server().url], { GLIDEMQ_PREFIX: 'fromenv' });
    expect(await prefixOf(envOnly.queue, envOnly.id, all)).to.deep.equal(['fromenv']);
  });

  it('--no-cluster overrides a profile that says cluster', async () => {
    writeConfig({ profiles: { c: { url: server().url, cluster: true } } });
    const asCluster = await cli(['--profile', 'c', 'stats', uniqueQueue('cli-profile'), '--json']);
    expect(asCluster.code).to.equal(2); // a standalone server refuses cluster commands
    const r = await cli(['--profile', 'c', '--no-cluster', 'stats', uniqueQueue('cli-profile'), '--json']);
    expect(r.code, r.stderr).to.equal(0);
  });

  it('the file is found at $XDG_CONFIG_HOME/glidemq/config.json without $GLIDEMQ_CONFIG', async () => {
    const xdg = join(dir, 'xdg');
    mkdirSync(join(xdg, 'glidemq'), { recursive: true });
    writeConfig({ profiles: { x: { url: server().url, prefix: 'xdgp' } } }, join(xdg, 'glidemq', 'config.json'));
    const queue = uniqueQueue('cli-profile');
    const r = await cli(['--profile', 'x', 'enqueue', queue, '{}'], { GLIDEMQ_CONFIG: undefined, XDG_CONFIG_HOME: xdg });
    expect(r.code, r.stderr).to.equal(0);
    expect(await prefixOf(queue, r.stdout.trim(), ['glide', 'xdgp'])).to.deep.equal(['xdgp']);
    // and under $HOME/.config when $XDG_CONFIG_HOME is not set
    const home = join(dir, 'home');
    mkdirSync(join(home, '.config', 'glidemq'), { recursive: true });
    writeConfig({ profiles: { h: { url: server().url } } }, join(home, '.config', 'glidemq', 'config.json'));
    const viaHome = await cli(['--profile', 'h', 'queues', '--json'], { GLIDEMQ_CONFIG: undefined, XDG_CONFIG_HOME: undefined, HOME: home });
    expect(viaHome.code, viaHome.stderr).to.equal(0);
  });

  /** A usage error: exit 2, one line on stderr naming the file, nothing on stdout. */
  function expectFileError(r: CliResult, path: string, what: RegExp): void {
    expect(r.code, r.stderr).to.equal(2);
    expect(r.stdout).to.equal('');
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).to.have.length(1);
    expect(lines[0]).to.include(path).and.match(what);
  }

  it('an unknown profile: exit 2, one line naming the file and the profiles it has', async () => {
    writeConfig({ profiles: { prod: { url: server().url }, staging: { url: server().url } } });
    expectFileError(await cli(['--profile', 'prdo', 'queues']), file, /no profile "prdo".*profiles there: prod, staging/);
    expectFileError(await cli(['queues'], { GLIDEMQ_PROFILE: 'nope' }), file, /no profile "nope" \(\$GLIDEMQ_PROFILE\)/);
    const missing = join(dir, 'missing.json');
    expectFileError(await cli(['--profile', 'prod', 'queues'], { GLIDEMQ_CONFIG: missing }), missing, /does not exist/);
  });

  it('a malformed file: exit 2, one line naming the file and the problem', async () => {
    const cases: [unknown, RegExp][] = [
      ['{"profiles": {', /not valid JSON/],
      ['[1, 2]', /expected a JSON object/],
      [{ profile: {} }, /unknown key "profile"/],
      [{ profiles: [] }, /"profiles" must be an object/],
      [{ profiles: { p: 'redis://x' } }, /profile "p" must be an object/],
      [{ profiles: { p: { url: server().url, 'tls-ca': 'ca.pem' } } }, /profile "p" has an unknown setting "tls-ca"/],
      [{ profiles: { p: { url: 6379 } } }, /profile "p": "url" must be a non-empty string/],
      [{ profiles: { p: { cluster: 'yes' } } }, /"cluster" must be true or false/],
    ];
    // a file per case, so the cases run four at a time
    await inParallel(cases, async ([doc, what], i) => {
      const path = join(dir, `malformed-${i}.json`);
      writeConfig(doc, path);
      // a broken file is an error even when no profile is named: its settings would be silently lost
      expectFileError(await cli(['queues', '-u', server().url], { GLIDEMQ_CONFIG: path }), path, what);
    });
    writeConfig({ profiles: { p: { url: 'http://db:6379' } } });
    expectFileError(await cli(['--profile', 'p', 'queues']), file, /profile "p": invalid server URL|profile "p": .*redis:\/\//);
    writeConfig({ profiles: { p: { url: server().url, tlsCa: 'ca.pem' } } });
    expectFileError(await cli(['--profile', 'p', 'queues']), file, /profile "p": tlsCa is for TLS servers/);
  });

  it('the password in a profile URL is never printed', async () => {
    writeConfig({ profiles: { p: { url: `redis://admin:topsecret-pw@${deadUrl.slice('redis://'.length)}` } } });
    const r = await cli(['--profile', 'p', 'stats', 'q']);
    expect(r.code).to.equal(2);
    expect(r.stdout + r.stderr).to.not.include('topsecret-pw');
    expect(r.stderr).to.include('admin:***@');
    writeConfig({ profiles: { p: { url: 'redis://admin:topsecret-pw@db:notaport' } } });
    const bad = await cli(['--profile', 'p', 'stats', 'q']);
    expect(bad.code).to.equal(2);
    expect(bad.stdout + bad.stderr).to.not.include('topsecret-pw');
  });

  it('help names the profile file and the precedence', async () => {
    const r = await cli(['--help'], { COLUMNS: '100' });
    expect(r.stdout).to.include('--profile <name>').and.include('--utc').and.include('$GLIDEMQ_PREFIX');
    expect(r.stdout).to.match(/flag wins over the profile you name, which wins over the environment[\s\S]*"default" profile/);
  });
});

describe('glidemq --utc (CLI)', function () {
  this.timeout(30000);
  const server = useServer();

  it('times are local with the zone by default, ISO 8601 UTC with --utc', async () => {
    const queue = uniqueQueue('cli-utc');
    const q = new Queue(queue, { connection: server().url });
    let timestamp: number;
    let id: string;
    try {
      const job = await q.add('x', {});
      ({ timestamp, id } = job);
    } finally {
      await q.close();
    }
    const local = await runCli(['job', queue, id, '-u', server().url], { env: { TZ: 'Asia/Kolkata' } });
    expect(local.code, local.stderr).to.equal(0);
    const ist = new Date(timestamp + 5.5 * 3_600_000).toISOString(); // the same instant on India's clock (+05:30, no DST)
    expect(local.stdout).to.match(new RegExp(`│ added\\s+│ ${ist.slice(0, 10)} ${ist.slice(11, 19)} \\+05:30\\s+│`));
    const utc = await runCli(['job', queue, id, '-u', server().url, '--utc'], { env: { TZ: 'Asia/Kolkata' } });
    expect(utc.code, utc.stderr).to.equal(0);
    expect(utc.stdout).to.match(new RegExp(`│ added\\s+│ ${new Date(timestamp).toISOString().slice(0, 19)}Z\\s+│`));
    // the global flag also works after the command, as the other global options do
    const after = await runCli(['metrics', queue, '--table', '--minutes', '2', '-u', server().url, '--utc'], { env: { TZ: 'Asia/Kolkata' } });
    expect(after.stdout).to.match(/ UTC \(2 min\)/);
    const before = await runCli(['metrics', queue, '--table', '--minutes', '2', '-u', server().url], { env: { TZ: 'Asia/Kolkata' } });
    expect(before.stdout).to.match(/ \+05:30 \(2 min\)/);
  });
});
