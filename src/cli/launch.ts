/**
 * Starts the command line as fast as Node allows: from the one-file bundle `bundle.cjs` (made by
 * `npm run build`), compiled with the V8 code cache `bundle.cjs.cache` that the build writes next
 * to it, so a short command such as one `glidemq enqueue` neither resolves a module tree nor
 * parses half a megabyte of JavaScript. A cache from another Node version is rejected by V8 and the
 * bundle is compiled as usual; without a bundle, or with one older than the modules (tsc run
 * alone), the CLI starts from the modules.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import vm from 'node:vm';

const BUNDLE = fileURLToPath(new URL('bundle.cjs', import.meta.url));
const CACHE = `${BUNDLE}.cache`;
const MODULES_ENTRY = fileURLToPath(new URL('main.js', import.meta.url));

interface Entry {
  main: (argv: string[]) => Promise<void>;
  buildProgram: () => unknown;
  useModuleImporter: (importer: (url: string) => Promise<unknown>) => void;
}

interface Bundle {
  script: vm.Script;
  entry: Entry;
}

const mtime = (file: string) => statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? -1;

function loadBundle(cachedData?: Buffer): Bundle {
  const code = readFileSync(BUNDLE, 'utf8');
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${code}\n})`, {
    filename: BUNDLE,
    cachedData,
  });
  const module = { exports: {} as Entry };
  script.runInThisContext()(module.exports, createRequire(BUNDLE), module, BUNDLE, fileURLToPath(new URL('.', import.meta.url)));
  return { script, entry: module.exports };
}

export async function launch(argv: string[]): Promise<void> {
  if (mtime(BUNDLE) < mtime(MODULES_ENTRY)) {
    const { main } = (await import(new URL('main.js', import.meta.url).href)) as Entry;
    return main(argv);
  }
  const cache = mtime(CACHE) >= mtime(BUNDLE) ? readFileSync(CACHE) : undefined; // -1: no cache
  const { entry } = loadBundle(cache);
  entry.useModuleImporter((url) => import(url)); // processor scripts (see load-processor.ts)
  return entry.main(argv);
}

/**
 * Build step: writes the code cache of the bundle once loaded and with every command registered,
 * so the cache holds the functions each start runs, not only the top level.
 */
export function writeCodeCache(): void {
  const bundle = loadBundle();
  bundle.entry.buildProgram();
  writeFileSync(CACHE, bundle.script.createCachedData());
}
