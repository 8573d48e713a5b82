/**
 * Starts the command line as fast as Node allows: from the one-file bundle `bundle.cjs` (made by
 * `npm run build`), compiled with the V8 code cache `bundle.cjs.cache` that the build writes next
 * to it, so a short command such as one `glidemq enqueue` neither resolves a module tree nor
 * parses half a megabyte of JavaScript. A cache from another Node version is rejected by V8 and the
 * bundle is compiled as usual; without a bundle, or in a checkout with one older than the modules
 * (tsc run alone), the CLI starts from the modules.
 */
import type vm from 'node:vm';

// Node's modules by process.getBuiltinModule, not import: an import of a built-in module makes the
// ESM loader build a module facade over it, some 2 ms of every start for these four.
const { readFileSync, statSync, writeFileSync } = process.getBuiltinModule('node:fs');
const { createRequire } = process.getBuiltinModule('node:module');
const { fileURLToPath } = process.getBuiltinModule('node:url');
const { Script } = process.getBuiltinModule('node:vm');

const BUNDLE = fileURLToPath(new URL('bundle.cjs', import.meta.url));
const CACHE = `${BUNDLE}.cache`;
const MODULES_ENTRY = fileURLToPath(new URL('main.js', import.meta.url));
/**
 * The bundle's name in stack traces. V8 keeps the name a script was compiled under in its code
 * cache, and a script compiled with the cache takes that name, whatever it is given: the build
 * machine's path would show in every installed copy's stack traces. So the bundle is compiled
 * under one name relative to the package, at build time and at run time alike.
 */
const SCRIPT_NAME = 'glidemq/dist/src/cli/bundle.cjs';
/** Only a checkout has it (the package does not ship it). */
const CHECKOUT_MARK = fileURLToPath(new URL('../../../tsconfig.json', import.meta.url));

interface Entry {
  main: (argv: string[]) => Promise<void>;
  buildProgram: () => Promise<unknown>;
  useModuleImporter: (importer: (url: string) => Promise<unknown>) => void;
}

interface Bundle {
  script: vm.Script;
  entry: Entry;
}

const mtime = (file: string) => statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? -1;

/**
 * The bundle is one function of the CommonJS module's arguments (bin/build-cli.mjs wraps it), kept
 * ASCII, where latin1 reads the same text as UTF-8 without decoding it: the file is compiled as it
 * is read.
 */
function loadBundle(cachedData?: Buffer): Bundle {
  const script = new Script(readFileSync(BUNDLE, 'latin1'), { filename: SCRIPT_NAME, cachedData });
  const module = { exports: {} as Entry };
  script.runInThisContext()(module.exports, createRequire(BUNDLE), module, BUNDLE, fileURLToPath(new URL('.', import.meta.url)));
  return { script, entry: module.exports };
}

export async function launch(argv: string[]): Promise<void> {
  // In a checkout, a bundle older than the modules is stale (tsc run alone), and so is a cache older
  // than the bundle. An installed package holds one build whose files are dated by when npm
  // unpacked them, in no set order: there the times say nothing, and the bundle is used.
  const bundled = mtime(BUNDLE);
  const checkout = mtime(CHECKOUT_MARK) >= 0;
  if (bundled < 0 || (checkout && bundled < mtime(MODULES_ENTRY))) {
    const { main } = (await import(new URL('main.js', import.meta.url).href)) as Entry;
    return main(argv);
  }
  const cached = mtime(CACHE); // -1: no cache
  const cache = cached >= 0 && (!checkout || cached >= bundled) ? readFileSync(CACHE) : undefined;
  const { entry } = loadBundle(cache);
  entry.useModuleImporter((url) => import(url)); // processor scripts (see load-processor.ts)
  return entry.main(argv);
}

/**
 * Build step: writes the code cache of the bundle once loaded and with every command registered,
 * so the cache holds the functions each start runs, not only the top level.
 */
export async function writeCodeCache(): Promise<void> {
  const bundle = loadBundle();
  await bundle.entry.buildProgram();
  writeFileSync(CACHE, bundle.script.createCachedData());
}

/**
 * Build step, given a server (bin/build-cli.mjs starts a throwaway one): runs the command `args`
 * from the bundle, and as the process ends with code 0 writes the code cache, which then also
 * holds what connecting, checking the library, one call and closing compile (some 6 ms of a
 * one-job `glidemq enqueue`, and of every command that connects). Any other end leaves the cache
 * writeCodeCache wrote.
 */
export async function writeCodeCacheAfter(args: string[]): Promise<void> {
  const bundle = loadBundle();
  process.once('exit', (code) => {
    if (code === 0) writeFileSync(CACHE, bundle.script.createCachedData());
  });
  bundle.entry.useModuleImporter((url) => import(url));
  // every command's module, as writeCodeCache: the run below loads only its own command's
  await bundle.entry.buildProgram();
  await bundle.entry.main([process.execPath, 'glidemq', ...args]);
}
