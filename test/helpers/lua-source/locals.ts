/**
 * `local` declarations of tokenized Lua: what a file leaves in scope, where a name is used, and the
 * most locals the joined library's main chunk holds at once. Read for the lua/ORDER rule (a function
 * file's top-level locals are its own) and the locals budget (Lua 5.1 refuses a chunk at 200).
 */
import { BLOCK_CLOSERS, BLOCK_OPENERS } from './blocks.js';
import { libraryFiles, type Tree } from './files.js';
import { isName, isMember, isOp, OPENS, type Tok } from './tokens.js';

export interface Local {
  name: string;
  line: number;
}

/** The names one `local` statement at toks[i] declares. */
function declaredAt(toks: Tok[], i: number): Local[] {
  if (isName(toks[i + 1], 'function')) return [{ name: toks[i + 2].text, line: toks[i + 2].line }];
  const out: Local[] = [];
  for (let j = i + 1; isName(toks[j]); j += 2) {
    out.push({ name: toks[j].text, line: toks[j].line });
    if (!isOp(toks[j + 1], ',')) break;
  }
  return out;
}

/**
 * The most locals of the main chunk active at once: Lua 5.1 allows 200 per function, counting
 * those of enclosing blocks, so a `do ... end` around a file's locals releases them at its `end`.
 * (Loop variables of a main-chunk `for` are not counted; lua/ has none.)
 */
export function mainChunkLocalsPeak(toks: Tok[]): number {
  const stack: { fn: boolean; count: number }[] = [{ fn: false, count: 0 }];
  let active = 0;
  let peak = 0;
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t.kind !== 'name') continue;
    const inFn = stack.some((b) => b.fn);
    if (t.text === 'local' && !inFn) {
      const n = declaredAt(toks, i).length;
      stack[stack.length - 1].count += n;
      active += n;
      peak = Math.max(peak, active);
    }
    // `local function f` declares f before its body opens: handled above, then the body opens here.
    if (BLOCK_OPENERS.has(t.text)) stack.push({ fn: t.text === 'function', count: 0 });
    else if (BLOCK_CLOSERS.has(t.text) && stack.length > 1) {
      const b = stack.pop()!;
      if (!stack.some((x) => x.fn) && !b.fn) active -= b.count;
    }
  }
  return peak;
}

/** Names declared by `local` statements at depth 0: still in scope after the file ends. */
export function topLevelLocals(toks: Tok[], depth: number[]): Local[] {
  return toks.flatMap((t, i) => (depth[i] === 0 && isName(t, 'local') ? declaredAt(toks, i) : []));
}

/** Uses of the variable `name`: not a field (`x.name`), method or table key (`{ name = 1 }`). */
export function variableUses(toks: Tok[], name: string): number[] {
  const lines: number[] = [];
  const brackets: string[] = [];
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t.kind === 'op' && OPENS[t.text]) brackets.push(t.text);
    else if (t.kind === 'op' && (t.text === ')' || t.text === '}' || t.text === ']')) brackets.pop();
    if (t.kind !== 'name' || t.text !== name || isMember(toks, i)) continue;
    const tableKey = brackets.at(-1) === '{' && isOp(toks[i + 1], '=') &&
      (isOp(toks[i - 1], '{') || isOp(toks[i - 1], ',') || isOp(toks[i - 1], ';'));
    if (!tableKey) lines.push(t.line);
  }
  return lines;
}

/** The locals each library file leaves in scope, as `file N` (a function file marked), largest first. */
export function localsLeftInScope(tree: Tree): string {
  // Largest first: the files whose locals a `do ... end` (function files) or a merge would free.
  return libraryFiles(tree)
    .map((f) => ({ name: f.name, kept: topLevelLocals(f.toks, f.depth).length }))
    .filter((f) => f.kept > 0)
    .sort((a, b) => b.kept - a.kept)
    .map((f) => `${f.name} ${f.kept}${tree.order.functions.includes(f.name) ? ' (function file)' : ''}`)
    .join(', ');
}
