/**
 * A small Lua tokenizer for the server-less contract test (test/unit/lua-contract.test.ts): turns a
 * lua/ file into tokens (comments dropped, but long `--[[ ]]` comments collected for the headers;
 * strings kept with common escapes resolved), plus the token predicates and bracket matching the
 * other lua-source readers share. Enough for those checks, not a Lua parser.
 */

type TokKind = 'name' | 'string' | 'number' | 'op';
/** One token; for a string, `text` is its content (common escapes resolved). */
export interface Tok {
  kind: TokKind;
  text: string;
  line: number;
}

const KEYWORDS = new Set([
  'and', 'break', 'do', 'else', 'elseif', 'end', 'false', 'for', 'function', 'if', 'in', 'local', 'nil',
  'not', 'or', 'repeat', 'return', 'then', 'true', 'until', 'while',
]);
const MULTI_OPS = ['...', '..', '==', '~=', '<=', '>=', '::'];
const NAME_RE = /[A-Za-z_][A-Za-z0-9_]*/y;
const NUMBER_RE = /0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/y;
const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', '"': '"', "'": "'" };

/** `[[`, `[=[`, ...: the level and where the body starts, or undefined. */
function longBracketAt(src: string, i: number): { level: number; body: number } | undefined {
  if (src[i] !== '[') return undefined;
  let j = i + 1;
  while (src[j] === '=') j++;
  return src[j] === '[' ? { level: j - i - 1, body: j + 1 } : undefined;
}

/** Index just past the long bracket that closes `level` (end of text when unterminated). */
function longBracketEnd(src: string, from: number, level: number): number {
  const close = ']' + '='.repeat(level) + ']';
  const at = src.indexOf(close, from);
  return at < 0 ? src.length : at + close.length;
}

function newlines(src: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) if (src[i] === '\n') n++;
  return n;
}

/** A quoted string starting at i: its content and the index past the closing quote. */
function shortString(src: string, i: number): { text: string; end: number } {
  const quote = src[i];
  let text = '';
  let j = i + 1;
  while (j < src.length && src[j] !== quote && src[j] !== '\n') {
    if (src[j] === '\\') {
      text += ESCAPES[src[j + 1]] ?? src[j + 1];
      j += 2;
    } else {
      text += src[j++];
    }
  }
  return { text, end: j + 1 };
}

/** A long comment `--[[ ... ]]`: its text and the line it starts on. */
export interface Comment {
  text: string;
  line: number;
}

export function tokenize(src: string, comments: Comment[] = []): Tok[] {
  const toks: Tok[] = [];
  let line = 1;
  let i = 0;
  const push = (kind: TokKind, text: string, end: number) => {
    toks.push({ kind, text, line });
    line += newlines(src, i, end);
    i = end;
  };
  while (i < src.length) {
    const c = src[i];
    if (c === '\n') {
      line++;
      i++;
    } else if (/\s/.test(c)) {
      i++;
    } else if (src.startsWith('--', i)) {
      const long = longBracketAt(src, i + 2);
      const nl = src.indexOf('\n', i);
      const end = long ? longBracketEnd(src, long.body, long.level) : nl < 0 ? src.length : nl;
      if (long) comments.push({ text: src.slice(long.body, end - long.level - 2), line });
      line += newlines(src, i, end);
      i = end;
    } else if (/[A-Za-z_]/.test(c)) {
      NAME_RE.lastIndex = i;
      const m = NAME_RE.exec(src)!;
      push('name', m[0], i + m[0].length);
    } else if (/\d/.test(c) || (c === '.' && /\d/.test(src[i + 1] ?? ''))) {
      NUMBER_RE.lastIndex = i;
      const m = NUMBER_RE.exec(src)!;
      push('number', m[0], i + m[0].length);
    } else if (c === '"' || c === "'") {
      const s = shortString(src, i);
      push('string', s.text, s.end);
    } else if (longBracketAt(src, i)) {
      const long = longBracketAt(src, i)!;
      const end = longBracketEnd(src, long.body, long.level);
      push('string', src.slice(long.body, end - long.level - 2), end);
    } else {
      const op = MULTI_OPS.find((o) => src.startsWith(o, i)) ?? c;
      push('op', op, i + op.length);
    }
  }
  return toks;
}

export const isOp = (t: Tok | undefined, op: string): boolean => t?.kind === 'op' && t.text === op;
export const isName = (t: Tok | undefined, name?: string): boolean =>
  t?.kind === 'name' && (name === undefined ? !KEYWORDS.has(t.text) : t.text === name);
/** `x.name` or `x:name`: a field or method, not the variable `name`. */
export const isMember = (toks: Tok[], i: number): boolean => isOp(toks[i - 1], '.') || isOp(toks[i - 1], ':');

export const OPENS: Record<string, string> = { '(': ')', '{': '}', '[': ']' };

/** Index of the bracket closing the one at `open` (last token when unbalanced). */
export function matchClose(toks: Tok[], open: number): number {
  let depth = 0;
  for (let i = open; i < toks.length; i++) {
    const t = toks[i];
    if (t.kind !== 'op') continue;
    if (OPENS[t.text]) depth++;
    else if (t.text === ')' || t.text === '}' || t.text === ']') {
      depth--;
      if (depth === 0) return i;
    }
  }
  return toks.length - 1;
}

/** Token ranges [from, to) of the comma-separated items inside the brackets at `open`. */
export function splitItems(toks: Tok[], open: number): [number, number][] {
  const close = matchClose(toks, open);
  const items: [number, number][] = [];
  let depth = 0;
  let from = open + 1;
  for (let i = open + 1; i < close; i++) {
    const t = toks[i];
    if (t.kind === 'op' && OPENS[t.text]) depth++;
    else if (t.kind === 'op' && (t.text === ')' || t.text === '}' || t.text === ']')) depth--;
    else if (depth === 0 && (isOp(t, ',') || isOp(t, ';'))) {
      items.push([from, i]);
      from = i + 1;
    }
  }
  if (from < close) items.push([from, close]);
  return items;
}
