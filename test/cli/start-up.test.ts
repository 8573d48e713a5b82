/**
 * A short command starts from the bundle loading only what it uses (README "Benchmarks", the
 * one-job enqueue row): not the other commands' Node modules, which the bundle requires at their
 * first use (bin/build-cli.mjs lazyBuiltins).
 */
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer } from '../helpers/valkey.js';

describe('CLI start-up', function () {
  const server = useServer();
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'glidemq-start-up-'));
    // preloaded in the CLI's process: the built-in modules it loaded, written as it exits
    writeFileSync(
      join(dir, 'loaded.cjs'),
      "process.on('exit', () => require('node:fs').writeFileSync(process.env.LOADED_LIST, process.moduleLoadList.join('\\n')));\n",
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a one-job enqueue loads none of the Node modules only other commands or other servers need, and still adds its job', async () => {
    const list = join(dir, 'enqueue.txt');
    const r = await runCli(['enqueue', uniqueQueue('start-up'), '{"a":1}', '-u', server().url], {
      env: { NODE_OPTIONS: `--require ${join(dir, 'loaded.cjs')}`, LOADED_LIST: list },
    });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim()).to.match(/^\d+$/);
    const loaded = readFileSync(list, 'utf8').split('\n');
    for (const name of ['child_process', 'http', 'worker_threads', 'perf_hooks', 'tls', 'assert', 'dgram']) {
      expect(loaded, name).not.to.include(`NativeModule ${name}`);
    }
  });
});
