/**
 * The coded errors the Lua can raise: every `ERR_<CODE>` that begins a string literal of a library
 * file. The contract test compares them with src/engine/shared/errors.ts LUA_ERRORS, both directions.
 */
import { libraryFiles, type Tree } from './files.js';

export function luaErrorCodes(tree: Tree): Set<string> {
  const lua = new Set<string>();
  for (const file of libraryFiles(tree)) {
    for (const t of file.toks) {
      const m = t.kind === 'string' ? /^(ERR_[A-Z_]+)(?:\s|$)/.exec(t.text) : null;
      if (m) lua.add(m[1]);
    }
  }
  return lua;
}
