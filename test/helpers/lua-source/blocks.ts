/**
 * Block nesting of tokenized Lua, by block counting (function/do/if/repeat ... end/until): which
 * tokens sit inside a function body, and whether a file's blocks balance. The contract test uses it
 * to tell file-level declarations from local ones, and to fail on a file it cannot read (a mid-edit
 * file, or a gap in the tokenizer) rather than pass on nothing.
 */
import type { Tok } from './tokens.js';

// Blocks: every `function`, `do`, `if`, `repeat` opens one; `end` and `until` close one. (`while`
// and `for` open theirs with their `do`; `elseif`/`else` continue the `if`.)
export const BLOCK_OPENERS = new Set(['function', 'do', 'if', 'repeat']);
export const BLOCK_CLOSERS = new Set(['end', 'until']);

export interface Blocks {
  /** Block depth before each token. */
  depth: number[];
  /** Whether each token is inside a function body (a `do ... end` of the main chunk is not). */
  inFunction: boolean[];
  problem?: string;
}

/** Block nesting of every token, and a problem when the blocks do not balance. */
export function blockDepths(toks: Tok[]): Blocks {
  const out: Blocks = { depth: [], inFunction: [] };
  const stack: string[] = [];
  for (const t of toks) {
    out.depth.push(stack.length);
    out.inFunction.push(stack.includes('function'));
    if (t.kind !== 'name') continue;
    if (BLOCK_OPENERS.has(t.text)) stack.push(t.text);
    else if (BLOCK_CLOSERS.has(t.text) && stack.pop() === undefined) return { ...out, problem: `line ${t.line}: '${t.text}' closes no block` };
  }
  if (stack.length) out.problem = `${stack.length} block(s) still open at the end of the file`;
  return out;
}
