/**
 * The CLI against a server that accepts connections but never answers: every one-shot command
 * gives up within a few seconds with exit 2 and one line naming the server (password hidden).
 */
import { expect } from 'chai';
import { useServer } from '../helpers/valkey.js';
import { FaultProxy, useFaultProxy } from '../helpers/proxy.js';
import { runCli, type CliResult } from '../helpers/cli.js';

describe('cli: a server that does not answer', function () {
  this.timeout(60000);
  const server = useServer();
  let proxy: FaultProxy;
  before(async () => {
    proxy = await new FaultProxy(server().port).start();
    proxy.blackhole();
  });
  after(async () => {
    await proxy.stop();
  });

  const commands: string[][] = [['stats', 'q'], ['enqueue', 'q', '{}'], ['queues'], ['job', 'q', '1'], ['audit']];
  const url = () => `redis://app:s3cret-pw@127.0.0.1:${proxy.port}`;
  // Each run waits out the CLI's connect timeout, idle: all start together, each test reads its own.
  const runs = new Map<string, Promise<{ r: CliResult; elapsed: number }>>();
  before(() => {
    for (const args of commands) {
      const started = Date.now();
      const run = runCli(['--url', url(), ...args], { timeoutMs: 20000 }).then((r) => ({ r, elapsed: Date.now() - started }));
      run.catch(() => undefined); // awaited by its test
      runs.set(args.join(' '), run);
    }
  });
  for (const args of commands) {
    it(`${args[0]} exits 2 with one line`, async () => {
      const { r, elapsed } = await runs.get(args.join(' '))!;
      expect(r.code, r.stderr).to.equal(2);
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).to.have.length(1);
      expect(lines[0]).to.match(/cannot reach|no answer|timeout/i);
      expect(lines[0]).to.contain(`app:***@127.0.0.1:${proxy.port}`);
      expect(r.stderr + r.stdout).not.to.contain('s3cret-pw');
      expect(elapsed, 'a safety net: the command must not hang').to.be.below(12000);
    });
  }
});

describe('cli: enqueue --ndjson with replies cut', function () {
  this.timeout(60000);
  const server = useServer();
  const { proxy: current } = useFaultProxy(server, 2000);

  it('stores each line once and prints the id of the stored job for each', async () => {
    const proxy = current();
    const lines = Array.from({ length: 5000 }, (_, i) => JSON.stringify({ line: i }));
    // the CLI adds in pipelined chunks of 200: cut the replies of three of them
    const cuts = (async () => {
      for (let i = 0; i < 3; i++) await proxy.cutOn(/glidemq_add/, { forward: true });
    })();
    const r = await runCli(['--url', proxy.url, 'enqueue', 'ndcut', '--ndjson', '--json'], { input: lines.join('\n') + '\n', timeoutMs: 40000 });
    proxy.disarm();
    await cuts;
    expect(r.code, r.stderr).to.equal(0);
    expect(proxy.stats.cuts, 'cuts that landed').to.be.at.least(1);
    const printed = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string });
    expect(new Set(printed.map((p) => p.id)).size).to.equal(lines.length);
    const c = server().client();
    try {
      const keys = await c.keys('glide:{ndcut}:job:*');
      expect(keys.length, 'jobs stored').to.equal(lines.length);
      for (const [i, p] of printed.entries()) {
        if (i % 250 === 0) expect(JSON.parse((await c.hget(`glide:{ndcut}:job:${p.id}`, 'data')) ?? 'null')).to.deep.equal({ line: i });
      }
    } finally {
      c.disconnect();
    }
  });
});
