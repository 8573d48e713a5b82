import { expect } from 'chai';
import { runCli } from '../helpers/cli.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';

describe('glidemq metrics (CLI)', function () {
  const server = useServer();
  const h = new Harness(server);
  let name: string;

  before(async () => {
    name = uniqueQueue('cli-metrics');
    const q = h.queue(name);
    const w = h.worker(name, async (job) => {
      if (job.data.fail) throw new Error('nope');
      return 1;
    });
    await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }, { name: 'c', data: { fail: true } }]);
    await waitFor(() => w.finished.completed + w.finished.failed === 3, 'three jobs to finish');
    await h.cleanup();
  });

  it('prints sparklines with totals for the last hour', async () => {
    const r = await runCli(['metrics', name, '-u', server().url], { env: { COLUMNS: '120' } });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.include(name);
    expect(r.stdout).to.include('(60 min)');
    expect(r.stdout).to.include('per minute');
    expect(r.stdout).to.match(/│ completed\s+│ [▁▂▃▄▅▆▇█]{60} │\s+2 │/);
    expect(r.stdout).to.match(/│ failed\s+│ [▁▂▃▄▅▆▇█]{60} │\s+1 │/);
    expect(r.stdout).to.match(/│ completed\s+│ ▁*█▁* │/); // one busy minute, the rest quiet
  });

  it('at 80 columns the sparklines sum two minutes each', async () => {
    const r = await runCli(['metrics', name, '-u', server().url], { env: { COLUMNS: '80' } });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.include('per 2 min');
    expect(r.stdout).to.match(/│ completed\s+│ [▁▂▃▄▅▆▇█]{30} │\s+2 │/);
  });

  it('--table prints one row per minute and a total', async () => {
    const r = await runCli(['metrics', name, '--table', '--minutes', '3', '-u', server().url]);
    expect(r.code, r.stderr).to.equal(0);
    const rows = r.stdout.split('\n').filter((l) => /^│ (\d\d:\d\d|total)/.test(l));
    expect(rows).to.have.length(4);
    expect(rows[3]).to.match(/│ total\s+│\s+2 │\s+1 │/);
  });

  it('--json prints the series', async () => {
    const r = await runCli(['metrics', name, '--json', '--minutes', '1440', '-u', server().url]);
    expect(r.code, r.stderr).to.equal(0);
    const doc = JSON.parse(r.stdout);
    expect(doc).to.include({ queue: name, completed: 2, failed: 1 });
    expect(doc.minutes).to.have.length(1440);
    expect(Object.keys(doc.minutes[0]).sort()).to.deep.equal(['avgMs', 'completed', 'failed', 'minute', 'processingMs']);
    const busy = doc.minutes.filter((m: { completed: number; failed: number }) => m.completed + m.failed > 0);
    expect(busy).to.have.length(1);
    expect(busy[0]).to.include({ completed: 2, failed: 1 });
    expect(busy[0].minute % 60_000).to.equal(0);
  });

  it('a bad --minutes is a usage error (exit 2, one line)', async () => {
    const r = await runCli(['metrics', name, '--minutes', '0', '-u', server().url]);
    expect(r.code).to.equal(2);
    expect(r.stderr.trim().split('\n')).to.have.length(1);
    expect(r.stderr).to.match(/--minutes must be a whole number from 1 to 1440/);
  });
});
