#!/usr/bin/env node
/**
 * The build after tsc (`npm run build`): bundles the CLI into one file, dist/src/cli/bundle.cjs,
 * then writes what makes a short command start fast: the assembled Lua library
 * (library-code.ts writeLibrarySnapshot) and the bundle's V8 code cache (launch.ts).
 */
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = new URL('../', import.meta.url);

/**
 * ioredis adds its ~600 command methods one at a time to a class prototype. V8 keeps a prototype
 * in fast mode while it grows and copies its property descriptors at each addition: some 9 ms of
 * every CLI start. Two properties added and deleted first put the prototype in dictionary mode,
 * where an addition is cheap; V8 makes it fast again when it is first used as a prototype, so
 * nothing else changes. Should ioredis's text change, the bundle is built without this and the
 * build says so.
 */
const ioredisPrototype = {
  name: 'ioredis-prototype',
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/]ioredis[\\/]built[\\/]utils[\\/]Commander\.js$/ }, async ({ path }) => {
      const text = await readFile(path, 'utf8');
      const anchor = '\nconst commands = commands_1.list.filter(';
      if (!text.includes(anchor)) {
        console.warn(`build-cli: ${path} has changed: ioredis's command methods are added to a fast-mode prototype (slower CLI start)`);
        return undefined;
      }
      const setup = 'Commander.prototype.__glidemqA = 0; Commander.prototype.__glidemqB = 0; delete Commander.prototype.__glidemqA; delete Commander.prototype.__glidemqB;';
      return { contents: text.replace(anchor, `\n${setup}${anchor}`), loader: 'js' };
    });
  },
};

/**
 * Node's built-in modules that no short command needs at start but some part of the bundle requires
 * at load: child_process (commander, `dev`, sandboxes), tls and dns (ioredis, for rediss:// and
 * clusters), assert (the RESP parser's errors), http (the exporter and the dashboard),
 * worker_threads, readline, perf_hooks. Node
 * compiles each one (and what it requires: child_process brings dgram and more) when it is first
 * required, some 5 ms of every start. In the bundle, `require` of one of them returns a stand-in
 * that requires the module at the first use of any of its properties; every use of a module in
 * the bundle is a property read at call time (`tls_1.connect(...)`, `(0, import_node_http.createServer)(...)`),
 * or a call of assert itself, so nothing else changes. Stringified into the banner: it must not refer to anything outside itself.
 */
function lazyBuiltins(realRequire) {
  const LAZY = new Set(['child_process', 'tls', 'dns', 'assert', 'http', 'https', 'worker_threads', 'readline', 'readline/promises', 'perf_hooks', 'dgram']);
  /** The modules that are themselves a function. */
  const CALLABLE = new Set(['assert']);
  const standIns = new Map();
  const standIn = (id) => {
    let real;
    const load = () => (real ??= realRequire(id));
    return new Proxy(CALLABLE.has(id.replace(/^node:/, '')) ? () => undefined : Object.create(null), {
      apply: (_, self, args) => Reflect.apply(load(), self, args),
      get: (_, key) => load()[key],
      set: (_, key, value) => Reflect.set(load(), key, value),
      has: (_, key) => key in load(),
      ownKeys: () => Reflect.ownKeys(load()),
      getOwnPropertyDescriptor: (_, key) => {
        const d = Reflect.getOwnPropertyDescriptor(load(), key);
        return d && { ...d, configurable: true };
      },
      defineProperty: (_, key, d) => Reflect.defineProperty(load(), key, d),
      deleteProperty: (_, key) => Reflect.deleteProperty(load(), key),
      getPrototypeOf: () => Reflect.getPrototypeOf(load()),
    });
  };
  const lazyRequire = (id) => {
    if (!LAZY.has(id.startsWith('node:') ? id.slice(5) : id)) return realRequire(id);
    let m = standIns.get(id);
    if (!m) standIns.set(id, (m = standIn(id)));
    return m;
  };
  return Object.assign(lazyRequire, realRequire);
}

await build({
  absWorkingDir: fileURLToPath(root),
  entryPoints: ['dist/src/cli/main.js'],
  outfile: 'dist/src/cli/bundle.cjs',
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: true,
  charset: 'ascii', // launch.ts reads the bundle as latin1
  logLevel: 'warning',
  // The bundle is CommonJS: import.meta.url is its own file's URL (library-code.ts finds lua/ from it).
  define: { 'import.meta.url': '__glidemqUrl' },
  // One function of the CommonJS module's arguments, which launch.ts compiles as the file is: a
  // wrapper added at run time would copy the 750 KB of text again at every start.
  banner: { js: `(function (exports, require, module, __filename, __dirname) {const __glidemqUrl = require('node:url').pathToFileURL(__filename).href;require = (${lazyBuiltins})(require);` },
  footer: { js: '})' },
  plugins: [ioredisPrototype],
  // optional peer dependencies, loaded from node_modules only when used: OpenTelemetry's API by a
  // traced object (never by the CLI itself), bull-board and express by `glidemq ui`
  external: ['@opentelemetry/api', '@bull-board/*', 'express'],
});

const nonAscii = /[^\x00-\x7f]/.exec(await readFile(new URL('dist/src/cli/bundle.cjs', root), 'latin1'));
if (nonAscii) throw new Error(`build-cli: the bundle holds a non-ASCII character at ${nonAscii.index}, and launch.ts reads it as latin1`);
(await import(new URL('dist/src/engine/connecting/library-code.js', root).href)).writeLibrarySnapshot();
await (await import(new URL('dist/src/cli/launch.js', root).href)).writeCodeCache();
await warmCodeCache().catch((err) => console.warn(`build-cli: no warm-up of the code cache: ${err instanceof Error ? err.message : err}`));

/**
 * Where valkey-server is installed (as for the tests), the code cache is written again after one
 * `glidemq enqueue` against a throwaway server (the test helpers' TestServer), in a process of its
 * own: the cache then also holds what a command that connects compiles. Without a server, or if
 * anything fails, the cache writeCodeCache wrote stays, and the build says why.
 */
async function warmCodeCache() {
  const { SERVER_BIN, TestServer } = await import(new URL('dist/test/helpers/valkey.js', root).href);
  if (spawnSync('sh', ['-c', `command -v ${SERVER_BIN}`]).status !== 0) {
    console.warn(`build-cli: no ${SERVER_BIN}: the code cache holds the commands' setup only (a slower first call to a server)`);
    return;
  }
  const server = await new TestServer().start();
  try {
    const args = ['enqueue', 'build-warm-up', '{}', '--url', server.url];
    const script = `(await import(${JSON.stringify(new URL('dist/src/cli/launch.js', root).href)})).writeCodeCacheAfter(${JSON.stringify(args)})`;
    // none of the builder's glidemq settings (a password, a profile) reaches the throwaway server
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GLIDEMQ_')));
    env.GLIDEMQ_CONFIG = join(server.dir, 'no-profiles.json');
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000, env });
    if (run.status !== 0) console.warn(`build-cli: the warm-up enqueue failed (${run.status ?? run.signal}): ${run.stderr.trim()}; the code cache holds the commands' setup only`);
  } finally {
    await server.stop();
  }
}
