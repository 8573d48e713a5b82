/**
 * `--confirm` on enqueue (single, NDJSON, flow), worker and publish (src/cli/confirm-flag.ts): the
 * writes are confirmed with WAITAOF / WAIT (counted in INFO commandstats), a confirmation that
 * cannot hold fails the command, and bad values are usage errors (one line, exit 2).
 */
import { expect } from 'chai';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { fixturePath } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

async function waitaofCalls(c: Redis): Promise<number> {
  const m = /cmdstat_waitaof:calls=(\d+)/.exec(await c.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

describe('--confirm (CLI)', function () {
  this.timeout(60000);
  const server = useServer({ persistence: 'aof-always' });

  it('enqueue --confirm fsync confirms a single add, an NDJSON bulk and a flow', async () => {
    const name = uniqueQueue('cli-confirm');
    const c = server().client();
    const q = new Queue(name, { connection: server().url });
    try {
      let before = await waitaofCalls(c);
      const one = await runCli(['enqueue', name, '{"v":1}', '--confirm', 'fsync', '--confirm-timeout', '2s', '-u', server().url]);
      expect(one.code, one.stderr).to.equal(0);
      expect(await waitaofCalls(c)).to.equal(before + 1);
      before = await waitaofCalls(c);
      const bulk = await runCli(['enqueue', name, '--ndjson', '--confirm', 'fsync', '-u', server().url], { input: '{"a":1}\n{"a":2}\n' });
      expect(bulk.code, bulk.stderr).to.equal(0);
      expect(await waitaofCalls(c)).to.be.greaterThan(before);
      const dir = mkdtempSync(join(tmpdir(), 'glidemq-confirm-'));
      const file = join(dir, 'flow.json');
      writeFileSync(file, JSON.stringify({ name: 'p', queueName: name, children: [{ name: 'c', queueName: name }] }));
      before = await waitaofCalls(c);
      const flow = await runCli(['enqueue', name, '--flow', file, '--confirm', 'fsync', '-u', server().url]);
      expect(flow.code, flow.stderr).to.equal(0);
      expect(await waitaofCalls(c)).to.equal(before + 1);
      expect((await q.getJobCounts()).waiting).to.equal(4);
    } finally {
      c.disconnect();
      await q.close();
    }
  });

  it('a confirmation that cannot hold fails the command (exit 1) saying what was reached and that a retry is safe', async () => {
    const name = uniqueQueue('cli-confirm-to');
    const r = await runCli(['enqueue', name, '--confirm', 'fsync,replicas=1', '--confirm-timeout', '100ms', '-u', server().url]);
    expect(r.code, r.stderr).to.equal(1);
    expect(r.stderr.trim().split("\n")).to.have.length(1);
    expect(r.stderr).to.match(/fsynced locally, fsynced on 0 of 1 replica/);
    expect(r.stderr).to.match(/a retry is safe/);
  });

  it('publish --confirm and worker --confirm confirm their writes', async () => {
    const c = server().client();
    const name = uniqueQueue('cli-confirm-w');
    try {
      let before = await waitaofCalls(c);
      const p = await runCli(['publish', uniqueQueue('bc'), 'a.b', '{}', '--confirm', 'fsync', '-u', server().url]);
      expect(p.code, p.stderr).to.equal(0);
      expect(await waitaofCalls(c)).to.equal(before + 1);
      expect((await runCli(['enqueue', name, '{}', '-u', server().url])).code).to.equal(0);
      before = await waitaofCalls(c);
      const w = await runCli(['worker', fixturePath('processors', 'echo.mjs'), '-q', name, '--confirm', 'fsync', '--max-jobs', '1', '-u', server().url]);
      expect(w.code, w.stderr).to.equal(0);
      expect(await waitaofCalls(c)).to.be.at.least(before + 1);
      // a broadcast subscriber confirms its finishes as a queue worker does
      const bc = uniqueQueue('cli-confirm-bc');
      expect((await runCli(['publish', bc, 'a.b', '{}', '-u', server().url])).code).to.equal(0);
      before = await waitaofCalls(c);
      const bw = await runCli([
        'worker', fixturePath('processors', 'echo.mjs'), '--broadcast', bc, '--subscription', 's', '--start-from', 'earliest',
        '--confirm', 'fsync', '--exit-when-idle', '-u', server().url,
      ]);
      expect(bw.code, bw.stderr).to.equal(0);
      expect(await waitaofCalls(c)).to.be.at.least(before + 1);
    } finally {
      c.disconnect();
    }
  });

  it('worker --require-durable starts on a server at the baseline, and refuses (exit 1, checks named) below it', async () => {
    const name = uniqueQueue('cli-durable');
    expect((await runCli(['enqueue', name, '{}', '-u', server().url])).code).to.equal(0);
    const ok = await runCli(['worker', fixturePath('processors', 'echo.mjs'), '-q', name, '--require-durable', '--max-jobs', '1', '-u', server().url]);
    expect(ok.code, ok.stderr).to.equal(0);
    const c = server().client();
    try {
      await c.config('SET', 'min-replicas-to-write', '1');
      const refused = await runCli(['worker', fixturePath('processors', 'echo.mjs'), '-q', name, '--require-durable', '-u', server().url]);
      expect(refused.code, refused.stderr).to.equal(1);
      expect(refused.stderr).to.match(/below the durable baseline.*min-replicas-to-write/);
    } finally {
      await c.config('SET', 'min-replicas-to-write', '0');
      c.disconnect();
    }
  });

  it('bad --confirm values are usage errors (exit 2, one line)', async () => {
    const cases: [string[], RegExp][] = [
      [['enqueue', 'q', '--confirm', 'always'], /--confirm must be fsync, replicas=N or fsync,replicas=N/],
      [['enqueue', 'q', '--confirm', 'replicas=0'], /--confirm replicas must be a whole number from 1/],
      [['enqueue', 'q', '--confirm', 'fsync,fsync'], /--confirm must be/],
      [['enqueue', 'q', '--confirm-timeout', '2s'], /--confirm-timeout needs --confirm/],
      [['enqueue', 'q', '--confirm', 'fsync', '--confirm-timeout', 'soon'], /--confirm-timeout/],
      [['publish', 'b', 'a.b', '--confirm', 'replicas=x'], /--confirm replicas/],
      [['worker', fixturePath('processors', 'echo.mjs'), '-q', 'q', '--confirm', 'nope'], /--confirm must be/],
    ];
    await inParallel(cases, async ([args, why]) => {
      const r = await runCli([...args, '-u', server().url]);
      expect(r.code, args.join(' ')).to.equal(2);
      expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1);
      expect(r.stderr, args.join(' ')).to.match(why);
    });
  });
});
