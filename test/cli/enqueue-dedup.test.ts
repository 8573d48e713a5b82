import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

describe('glidemq enqueue --dedup-* (CLI)', function () {
  const server = useServer();

  it('a second enqueue with the same --dedup-id prints the first job id and adds nothing', async () => {
    const name = uniqueQueue('cli-dedup');
    const args = ['enqueue', name, '{"user":7}', '--dedup-id', 'user-7', '--dedup-ttl', '1m', '-u', server().url];
    const first = await runCli([...args, '--json']);
    expect(first.code, first.stderr).to.equal(0);
    const a = JSON.parse(first.stdout);
    expect(a).to.include({ queue: name, created: true });
    const second = await runCli([...args, '--json']);
    expect(second.code, second.stderr).to.equal(0);
    expect(JSON.parse(second.stdout)).to.deep.equal({ id: a.id, queue: name, name: 'default', created: false, deduplicated: 'blocked' });
    const plain = await runCli(args);
    expect(plain.stdout.trim()).to.equal(a.id);
    const q = new Queue(name, { connection: server().url });
    try {
      expect((await q.getJobCounts()).waiting).to.equal(1);
      // --dedup-ttl without a mode is throttle: the entry says so and ends a minute later
      const entry = await q.client.hget(q.keys.dedup, 'user-7');
      const [mode, expiresAt, id] = String(entry).split(':');
      expect([mode, id]).to.deep.equal(['t', a.id]);
      expect(Number(expiresAt) - Date.now()).to.be.within(30_000, 60_000);
    } finally {
      await q.close();
    }
  });

  it('--dedup-mode debounce with --delay replaces the pending job data', async () => {
    const name = uniqueQueue('cli-debounce');
    const base = ['enqueue', name, '--delay', '1h', '--dedup-id', 'doc', '--dedup-mode', 'debounce', '--json', '-u', server().url];
    const a = JSON.parse((await runCli([...base.slice(0, 2), '{"v":1}', ...base.slice(2)])).stdout);
    const b = await runCli([...base.slice(0, 2), '{"v":2}', ...base.slice(2)]);
    expect(b.code, b.stderr).to.equal(0);
    expect(JSON.parse(b.stdout)).to.include({ id: a.id, created: false, deduplicated: 'debounced' });
    const job = await runCli(['job', name, a.id, '--json', '-u', server().url]);
    expect(JSON.parse(job.stdout).data).to.deep.equal({ v: 2 });
  });

  it('bad dedup flags are usage errors (exit 2, one line)', async () => {
    const name = uniqueQueue('cli-dedup-bad');
    const cases: [string[], RegExp][] = [
      [['--dedup-ttl', '1m'], /need --dedup-id/],
      [['--dedup-id', 'x', '--dedup-mode', 'often'], /--dedup-mode must be simple, throttle or debounce/],
      [['--dedup-id', 'x', '--dedup-mode', 'throttle'], /throttle needs a ttl/],
      [['--dedup-id', 'x', '--dedup-mode', 'debounce'], /debounce needs a delay/],
      [['--dedup-id', 'x', '--dedup-ttl', 'soon'], /--dedup-ttl/],
    ];
    await inParallel(cases, async ([flags, why]) => {
      const r = await runCli(['enqueue', name, ...flags, '-u', server().url]);
      expect(r.code, flags.join(' ')).to.equal(2);
      expect(r.stderr.trim().split('\n'), flags.join(' ')).to.have.length(1);
      expect(r.stderr, flags.join(' ')).to.match(why);
    });
  });
});
