/**
 * Limits the Lua states that the TypeScript must share: a file-level `local NAME = <number>`
 * constant, or a length check `#x > N` in a given file. The contract test compares each with the
 * limit src/engine/ enforces (priority, metrics retention, job/group/dedup id, subject length).
 */
import { libraryFiles, type Tree } from './files.js';
import { isName, isOp } from './tokens.js';

export interface LuaLimit {
  value: number;
  where: string;
}

/** A file-level `local NAME = <number>` whose name matches, in any library file. */
export function luaConstant(tree: Tree, name: RegExp): LuaLimit | undefined {
  for (const file of libraryFiles(tree)) {
    const { toks, inFunction } = file;
    for (let i = 0; i < toks.length; i++) {
      if (!inFunction[i] && isName(toks[i], 'local') && isName(toks[i + 1]) && name.test(toks[i + 1].text) &&
        isOp(toks[i + 2], '=') && toks[i + 3]?.kind === 'number') {
        return { value: Number(toks[i + 3].text), where: `${file.name}:${toks[i].line} ${toks[i + 1].text}` };
      }
    }
  }
  return undefined;
}

/** A length check `#<operand> > N` (or `<= N`; N a number or a constant) in `fileName` whose operand matches. */
export function luaLengthCheck(tree: Tree, fileName: string, operand: RegExp): LuaLimit | undefined {
  const file = tree.files.get(fileName);
  if (!file) return undefined;
  const { toks } = file;
  for (let i = 0; i < toks.length; i++) {
    if (!isOp(toks[i], '#')) continue;
    let j = i + 1;
    const parts: string[] = [];
    while (isName(toks[j])) {
      parts.push(toks[j].text);
      j += isOp(toks[j + 1], '.') ? 2 : 1;
      if (!isOp(toks[j - 1], '.')) break;
    }
    if (!parts.length || !operand.test(parts.join('.')) || !(isOp(toks[j], '>') || isOp(toks[j], '<='))) continue;
    const limit = toks[j + 1];
    const value = limit?.kind === 'number' ? Number(limit.text) : isName(limit) ? luaConstant(tree, new RegExp(`^${limit.text}$`))?.value : undefined;
    if (value !== undefined) return { value, where: `${file.name}:${toks[i].line} #${parts.join('.')} ${toks[j].text} ${limit.text}` };
  }
  return undefined;
}
