/** Loads a processor module: the default export (ESM) or module.exports (CommonJS) must be a function. */
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { invalid } from '../engine/shared/errors.js';
import type { Processor } from '../engine/consuming/worker.js';

type ModuleImporter = (url: string) => Promise<unknown>;

// The CLI's bundle runs as a script compiled from V8's code cache, which cannot import() (Node
// gives such code no module loader), so the launcher, an ES module, lends its own (launch.ts).
let importModule: ModuleImporter = (url) => import(url);

export function useModuleImporter(importer: ModuleImporter): void {
  importModule = importer;
}

export async function loadProcessor(script: string): Promise<Processor> {
  const path = resolve(process.cwd(), script);
  if (!existsSync(path) || !statSync(path).isFile()) throw invalid(`processor script ${path} does not exist`);
  let mod: Record<string, unknown>;
  try {
    mod = (await importModule(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (err) {
    throw invalid(`processor script ${path} cannot be loaded: ${(err as Error).message.split('\n')[0]}`);
  }
  let fn: unknown = mod.default ?? mod;
  // CommonJS compiled from ESM sometimes nests the function one level deeper.
  if (typeof fn === 'object' && fn !== null && typeof (fn as { default?: unknown }).default === 'function') {
    fn = (fn as { default: unknown }).default;
  }
  if (typeof fn !== 'function') {
    throw invalid(`processor script ${path} exports no function: export default async (job) => result, or module.exports = async (job) => result`);
  }
  return fn as Processor;
}
