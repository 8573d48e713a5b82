/**
 * The command line through Valkey Sentinel (real `valkey-server --sentinel` processes): commands
 * over a `redis+sentinel://` URL, `audit` checking the primary, its replica and every sentinel's
 * view, a master name no sentinel knows (exit 2, one line naming it and the sentinels), and the
 * password never printed.
 */
import { expect } from 'chai';
import { runCli as run, type CliOptions, type CliResult } from '../helpers/cli.js';
import { useSentinelSet } from '../helpers/sentinel.js';
import { inParallel } from '../helpers/parallel.js';

const PASSWORD = 'sentinel/Quartz?Pw';
/** The sentinels want a password of their own, given the documented way. */
const SENTINEL_PASSWORD = 'sentinel-Onyx-Pw';
const runCli = (args: string[], opts: CliOptions = {}) => run(args, { ...opts, env: { GLIDEMQ_SENTINEL_PASSWORD: SENTINEL_PASSWORD, ...opts.env } });

interface JsonReport {
  nodes: { address: string; role: string; checks: { id: string; status: string; actual: string }[] }[];
  summary: Record<string, number>;
}

function noPassword(r: CliResult): void {
  const out = r.stdout + r.stderr;
  for (const piece of [PASSWORD, encodeURIComponent(PASSWORD), 'Quartz', 'Onyx']) expect(out, `the output shows "${piece}":\n${out}`).not.to.include(piece);
}

describe('glidemq over Valkey Sentinel', function () {
  this.timeout(60000);
  const set = useSentinelSet({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD });

  it('enqueue and stats over a redis+sentinel:// URL reach the primary', async () => {
    const url = set().url();
    const add = await runCli(['-u', url, 'enqueue', 'sq', '{"a":1}']);
    expect(add.code, add.stderr).to.equal(0);
    const added = await runCli(['-u', url, 'enqueue', 'sq', '{"a":2}', '--json']);
    expect(added.code, added.stderr).to.equal(0);
    const stats = await runCli(['-u', url, 'stats', 'sq', '--json']);
    expect(stats.code, stats.stderr).to.equal(0);
    expect(JSON.parse(stats.stdout).waiting).to.equal(2);
    // the jobs are on the node the sentinels name as primary
    const primary = await set().primary();
    const c = primary.client();
    try {
      expect(await c.exists('glide:{sq}:meta')).to.equal(1);
    } finally {
      c.disconnect();
    }
    for (const r of [add, added, stats]) noPassword(r);
  });

  it('audit checks the primary, its replica and each sentinel (master known, quorum, replicas, peers)', async () => {
    const s = set();
    const r = await runCli(['-u', s.url(), 'audit', '--json']);
    expect([0, 1], r.stderr).to.include(r.code);
    noPassword(r);
    const report = JSON.parse(r.stdout) as JsonReport;
    const primary = await s.primary();
    const replica = s.nodes.find((n) => n !== primary)!;
    expect(report.nodes.map((n) => [n.address, n.role])).to.deep.equal([
      [`127.0.0.1:${primary.port}`, 'master'],
      [`127.0.0.1:${replica.port}`, 'replica'],
      ...s.sentinels.map((x) => [x.address, 'sentinel']),
    ]);
    for (const node of report.nodes.filter((n) => n.role === 'sentinel')) {
      const byId = new Map(node.checks.map((c) => [c.id, c]));
      expect([...byId.keys()]).to.deep.equal(['sentinel', 'sentinel-master', 'sentinel-quorum', 'sentinel-replicas', 'sentinel-peers']);
      for (const c of byId.values()) expect(c.status, `${node.address} ${c.id}: ${c.actual}`).to.equal('pass');
      expect(byId.get('sentinel-master')!.actual).to.include(`127.0.0.1:${primary.port}`);
      expect(byId.get('sentinel-quorum')!.actual).to.equal('3 usable, quorum 2');
      expect(byId.get('sentinel-replicas')!.actual).to.equal(`1/1 ok: 127.0.0.1:${replica.port} ok`);
      expect(byId.get('sentinel-peers')!.actual).to.equal('3 known (3 in the URL)');
    }
    // the data nodes get the usual checks (replication seen from both sides)
    const rep = report.nodes[1].checks.find((c) => c.id === 'replication')!;
    expect(rep.status).to.equal('pass');
    expect(rep.actual).to.include(`primary 127.0.0.1:${primary.port}, link up`);

    const text = await runCli(['-u', s.url(), 'audit'], { env: { COLUMNS: '80' } });
    expect(text.stdout).to.include('sentinel-quorum');
    expect(text.stdout).to.include(s.sentinels[0].address);
    noPassword(text);
  });

  it('audit shows an unreachable sentinel as a failed check (the others still answer)', async () => {
    const s = set();
    const url = s.url().replace(s.sentinels[2].address, '127.0.0.1:1');
    const r = await runCli(['-u', url, 'audit', '--json']);
    expect(r.code, r.stderr).to.equal(1);
    const report = JSON.parse(r.stdout) as JsonReport;
    const dead = report.nodes.find((n) => n.address === '127.0.0.1:1')!;
    expect(dead.role).to.equal('sentinel');
    expect(dead.checks).to.have.length(1);
    expect(dead.checks[0]).to.include({ id: 'sentinel', status: 'fail' });
    expect(dead.checks[0].actual).to.include('ECONNREFUSED');
    noPassword(r);
  });

  it('a master name no sentinel knows: exit 2, one line naming it and the sentinels, the password hidden', async () => {
    const s = set();
    const url = s.url({ name: 'nosuchmaster' });
    await inParallel([['stats', 'sq'], ['enqueue', 'sq', '{}'], ['audit']], async (args) => {
      const r = await runCli(['-u', url, ...args]);
      expect(r.code, `${args[0]}: ${r.stdout}${r.stderr}`).to.equal(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).to.have.length(1);
      expect(lines[0]).to.include('no sentinel knows a master named "nosuchmaster"');
      for (const x of s.sentinels) expect(lines[0]).to.include(x.address);
      noPassword(r);
    });
  });

  it('sentinels that want a password: without $GLIDEMQ_SENTINEL_PASSWORD, or with a wrong one, exit 2 saying so', async () => {
    for (const [given, says] of [
      ['', 'a sentinel password is required ($GLIDEMQ_SENTINEL_PASSWORD)'],
      ['wrong-Onyx', 'wrong sentinel user name or password ($GLIDEMQ_SENTINEL_PASSWORD)'],
    ]) {
      for (const args of [['stats', 'sq'], ['audit']]) {
        const r = await runCli(['-u', set().url(), ...args], { env: { GLIDEMQ_SENTINEL_PASSWORD: given } });
        expect(r.code, r.stderr).to.equal(2);
        expect(r.stderr.trim()).to.equal(`glidemq: no sentinel gave the address of the primary "mymaster" (sentinels ${set().sentinels.map((x) => x.address).join(', ')}): ${says}`);
        noPassword(r);
      }
    }
  });

  it('a Sentinel URL that is malformed is a usage error before any connection (exit 2)', async () => {
    for (const [url, says] of [
      ['redis+sentinel://127.0.0.1:26379', 'names no master'],
      ['valkey+sentinel://127.0.0.1:notaport/m', 'bad port'],
      [`redis+sentinel://:${encodeURIComponent(PASSWORD)}@127.0.0.1:26379,/m`, 'empty sentinel address'],
    ] as const) {
      const r = await runCli(['-u', url, 'stats', 'sq']);
      expect(r.code, r.stderr).to.equal(2);
      expect(r.stderr).to.include(says);
      noPassword(r);
    }
    const cluster = await runCli(['-u', set().url(), '--cluster', 'stats', 'sq']);
    expect(cluster.code).to.equal(2);
    expect(cluster.stderr).to.include('drop --cluster');
    noPassword(cluster);
  });
});
