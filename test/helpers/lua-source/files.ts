/**
 * The lua/ tree as the contract test reads it: every lua/*.lua tokenized (with its leading header
 * comment and block nesting), lua/ORDER read as src/engine/connecting/library-code.ts reads it (split at its
 * `# functions` line), the library's files in that order, the joined library exactly as the client
 * loads it, and each file's file-level `local NAME = { ... }` tables (schemas, KEY_SUFFIX).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { blockDepths } from './blocks.js';
import { type Comment, isName, isOp, type Tok, tokenize } from './tokens.js';

/** dist/test/helpers/lua-source/ → the repository's lua/ (the same directory library-code.ts loads). */
const LUA_DIR = new URL('../../../../lua/', import.meta.url);
/** The file whose keys are a broadcast's, not a queue's (BroadcastKeys in keys.ts). */
export const BROADCAST_FILE = 'broadcast.lua';

export interface LuaFile {
  name: string;
  text: string;
  toks: Tok[];
  depth: number[];
  inFunction: boolean[];
  blockProblem?: string;
  /** The leading --[[ ]] comment's text, if the file starts with one. */
  header?: string;
  comments: Comment[];
}

export interface Order {
  helpers: string[];
  functions: string[];
  problems: string[];
}

export interface Tree {
  order: Order;
  /** Every lua/*.lua on disk, by name. */
  files: Map<string, LuaFile>;
}

function leadingComment(text: string): string | undefined {
  const m = /^\s*--\[(=*)\[([\s\S]*?)\]\1\]/.exec(text);
  return m?.[2];
}

function loadFile(name: string): LuaFile {
  const text = readFileSync(new URL(name, LUA_DIR), 'utf8');
  const comments: Comment[] = [];
  const toks = tokenize(text, comments);
  const { depth, inFunction, problem } = blockDepths(toks);
  return { name, text, toks, depth, inFunction, blockProblem: problem, header: leadingComment(text), comments };
}

/** Reads ORDER as library-code.ts does (trimmed lines, `#` comments skipped), split at `# functions`. */
function readOrder(): Order {
  const order: Order = { helpers: [], functions: [], problems: [] };
  let inFunctions = false;
  for (const line of readFileSync(new URL('ORDER', LUA_DIR), 'utf8').split('\n').map((l) => l.trim())) {
    if (!line) continue;
    if (line.startsWith('#')) {
      if (/^#\s*functions\b/i.test(line)) {
        if (inFunctions) order.problems.push('ORDER has two "# functions" lines');
        inFunctions = true;
      }
      continue;
    }
    (inFunctions ? order.functions : order.helpers).push(line);
  }
  if (!inFunctions) order.problems.push('ORDER has no "# functions" comment line between the helpers and the functions');
  return order;
}

export function loadTree(): Tree {
  const files = new Map<string, LuaFile>();
  for (const name of readdirSync(LUA_DIR).filter((f) => f.endsWith('.lua')).sort()) files.set(name, loadFile(name));
  return { order: readOrder(), files };
}

/** The files of the library, in ORDER (files ORDER names that do not exist are left out). */
export function libraryFiles(tree: Tree): LuaFile[] {
  return [...tree.order.helpers, ...tree.order.functions].flatMap((f) => tree.files.get(f) ?? []);
}

/** The tokens of the whole library, src/engine/connecting/library-code.ts LIBRARY_CODE. */
export async function joinedLibraryTokens(): Promise<Tok[]> {
  // Joined exactly as the client loads it; the `#!lua` line is not Lua.
  const { LIBRARY_CODE } = await import('../../../src/engine/connecting/library-code.js');
  return tokenize(LIBRARY_CODE.replace(/^#![^\n]*\n/, ''));
}

/** File-level (outside any function) `local NAME = { ... }` tables: name → token index of the `{`. */
export function fileTables(file: LuaFile): Map<string, number> {
  const out = new Map<string, number>();
  const { toks, inFunction } = file;
  for (let i = 0; i < toks.length; i++) {
    if (!inFunction[i] && isName(toks[i], 'local') && isName(toks[i + 1]) && isOp(toks[i + 2], '=') && isOp(toks[i + 3], '{')) {
      out.set(toks[i + 1].text, i + 3);
    }
  }
  return out;
}
