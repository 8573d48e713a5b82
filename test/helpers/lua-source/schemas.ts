/**
 * The ARGV layout the code decodes: each decodeArgs(name, args, HEAD, EACH, 'count') call (args.lua)
 * and the flat `{ 'name', KIND, ... }` schema tables it passes, inline or as a file-level local of
 * the same file or of a helper file. The contract test compares these names with the header's.
 */
import { fileTables, type LuaFile, type Tree } from './files.js';
import { isMember, isName, isOp, splitItems, type Tok } from './tokens.js';

export interface DecodeCall {
  /** The function name passed as the first argument, when it is a string literal. */
  fnName?: string;
  index: number;
  line: number;
  items: [number, number][];
}

export function findDecodeCalls(file: LuaFile): DecodeCall[] {
  const { toks } = file;
  const out: DecodeCall[] = [];
  for (let i = 0; i < toks.length; i++) {
    if (!isName(toks[i], 'decodeArgs') || isMember(toks, i) || isName(toks[i - 1], 'function') || !isOp(toks[i + 1], '(')) continue;
    const items = splitItems(toks, i + 1);
    const first = items[0];
    const fnName = first && first[1] - first[0] === 1 && toks[first[0]].kind === 'string' ? toks[first[0]].text : undefined;
    out.push({ fnName, index: i, line: toks[i].line, items });
  }
  return out;
}

/** The names of a flat `{ 'name', KIND, 'name', KIND, ... }` schema. */
function schemaNames(toks: Tok[], open: number): { names: string[]; problem?: string } {
  const items = splitItems(toks, open);
  const names: string[] = [];
  for (let k = 0; k < items.length; k += 2) {
    const [from, to] = items[k];
    if (to - from !== 1 || toks[from].kind !== 'string') {
      return { names, problem: `item ${k + 1} (line ${toks[from]?.line}) is not a 'name' string: the schema is not flat name, kind pairs` };
    }
    if (k + 1 >= items.length) return { names, problem: `'${toks[from].text}' has no kind after it` };
    names.push(toks[from].text);
  }
  return { names };
}

export interface Schema {
  label: string;
  names: string[];
  problem?: string;
}

/**
 * Resolves a decodeArgs argument to its schema: an inline table, or a top-level local table of
 * the same file or of a helper file. undefined for `nil` or an absent argument.
 */
export function resolveSchema(tree: Tree, file: LuaFile, item: [number, number] | undefined): Schema | undefined {
  if (!item) return undefined;
  const { toks } = file;
  const [from, to] = item;
  if (to - from === 1 && isName(toks[from], 'nil')) return undefined;
  if (isOp(toks[from], '{')) return { label: 'an inline table', ...schemaNames(toks, from) };
  if (to - from !== 1 || !isName(toks[from])) {
    return { label: '?', names: [], problem: `argument at line ${toks[from]?.line} is neither a table nor the name of one` };
  }
  const name = toks[from].text;
  const where = [file, ...tree.order.helpers.flatMap((f) => tree.files.get(f) ?? [])];
  for (const f of where) {
    const open = fileTables(f).get(name);
    if (open !== undefined) return { label: name, ...schemaNames(f.toks, open) };
  }
  return { label: name, names: [], problem: `schema ${name} is not a file-level "local ${name} = { ... }" of ${file.name} or a helper file` };
}
