/**
 * The npm package ships what runs: packed from the build in dist/ (`make test` builds first; the
 * package's own `prepack` runs that build before any real `npm pack` or publish), installed into an
 * empty project from the tarball, its `glidemq` command and its `import 'glidemq'` work there.
 * The dependencies come from npm's cache (filled by `npm ci`), or the registry when missing.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../helpers/fixtures.js';

const run = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const PKG = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string; scripts: Record<string, string> };
/** No colour and one help width, whichever terminal runs the tests. */
const ENV = { ...process.env, NO_COLOR: '1', COLUMNS: '80', npm_config_update_notifier: 'false' };

interface Packed {
  filename: string;
  files: { path: string }[];
}

async function pack(args: string[]): Promise<Packed> {
  // --ignore-scripts: pack the build that is there; prepack's clean build would rebuild dist/
  // under the running tests
  const { stdout } = await run(NPM, ['pack', '--json', '--ignore-scripts', ...args], { cwd: REPO_ROOT, env: ENV, maxBuffer: 16 << 20 });
  return (JSON.parse(stdout) as Packed[])[0];
}

describe('the npm package', function () {
  this.timeout(120000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'glidemq-package-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('holds the modules, the CLI bundle with its code cache and the Lua library, and no tests; prepack builds', async () => {
    const files = (await pack(['--dry-run'])).files.map((f) => f.path).sort();
    const lua = readFileSync(join(REPO_ROOT, 'lua', 'ORDER'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    expect(files).to.include.members([
      'package.json',
      'README.md',
      'bin/glidemq',
      'dist/src/index.js',
      'dist/src/index.d.ts',
      'dist/src/cli/launch.js',
      'dist/src/cli/main.js',
      'dist/src/cli/bundle.cjs',
      'dist/src/cli/bundle.cjs.cache',
      'lua/ORDER',
      ...lua.map((f) => `lua/${f}`),
    ]);
    const stray = files.filter((f) => /^(test|fixtures|src|dist\/test|node_modules)\//.test(f) || /\.map$/.test(f) || (/\.ts$/.test(f) && !/\.d\.ts$/.test(f)));
    expect(stray).to.deep.equal([]);
    expect(files.filter((f) => f.startsWith('bin/'))).to.deep.equal(['bin/glidemq']);
    expect(PKG.scripts.prepack).to.match(/npm run build$/);
  });

  it('installs from the tarball into an empty project: `glidemq --help`, `--version`, `import` and `require` of glidemq work', async () => {
    const { filename } = await pack(['--pack-destination', dir]);
    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    await run(NPM, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', join(dir, filename)], { cwd: app, env: ENV, timeout: 90000 });
    const bin = join(app, 'node_modules', '.bin', 'glidemq');
    const help = await run(bin, ['--help'], { cwd: app, env: ENV });
    expect(help.stdout).to.match(/^Usage: glidemq \[options\] \[command\]/);
    // the installed CLI is this build: the bundle it starts from is not older than the modules
    // (if this fails, `npm run build` was not run after the last change)
    const here = await run(process.execPath, [join(REPO_ROOT, 'bin', 'glidemq'), '--help'], { cwd: app, env: ENV });
    expect(help.stdout).to.equal(here.stdout);
    expect((await run(bin, ['--version'], { cwd: app, env: ENV })).stdout.trim()).to.equal(PKG.version);
    const imported = await run(process.execPath, ['-e', "import('glidemq').then((m) => console.log(typeof m.Queue, typeof m.Worker))"], { cwd: app, env: ENV });
    expect(imported.stdout.trim()).to.equal('function function');
    // require() of the ES module, as the Node versions package.json's engines names allow (CLI.md: require('glidemq'))
    const names = ['Queue', 'Worker', 'Job', 'QueueEvents', 'Broadcast', 'BroadcastWorker'];
    const script = `const m = require('glidemq'); console.log(${JSON.stringify(names)}.map((k) => typeof m[k]).join(' '))`;
    const required = await run(process.execPath, ['-e', script], { cwd: app, env: ENV });
    expect(required.stdout.trim()).to.equal(names.map(() => 'function').join(' '));
    // bull-board and express are optional peers, not installed here: `glidemq ui` says what to add
    const ui = await run(bin, ['ui'], { cwd: app, env: ENV }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(ui.code, ui.stderr).to.equal(2);
    expect(ui.stderr).to.match(/npm install @bull-board\/api @bull-board\/express express/);
  });
});
