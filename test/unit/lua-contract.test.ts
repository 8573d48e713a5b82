/**
 * The contract between lua/ and src/engine/, checked by reading lua/ as text (no server; issue 15).
 * Why without a server: these are facts of the source (which key names, which limits, which
 * argument layout), and a mismatch should fail in `make test-unit` before any integration test
 * meets it as a confusing runtime error.
 *
 * Checked:
 *  1. key names: every key the Lua builds is one src/engine/keys.ts builds for a sample queue or
 *     broadcast, and back (sets compared, with a diff);
 *  2. shared limits agree (priority, metrics retention, job/group/dedup id lengths, subject length);
 *  3. each function file's header lists the ARGV that its decodeArgs schemas decode, in order;
 *  4. server time: no header lists a `now` argument, and a function that uses `now` calls serverNow();
 *  5. every function is registered through register() (helpers.lua), names unique;
 *  6. lua/ORDER: helpers, a `# functions` line, functions; helpers register nothing; a function
 *     file's top-level locals are used by no other file;
 *  7. the joined library (as src/engine/library.ts joins it) stays well under Lua 5.1's 200 active
 *     locals in its main chunk: at most LOCALS_BUDGET at any point (a file's `do ... end` releases
 *     the locals it declares inside);
 *  8. the coded errors the Lua raises are exactly src/engine/errors.ts LUA_ERRORS (errors.ts says so).
 *
 * HEADER FORMAT (what part 3 reads). A function's header is, in this order of preference:
 *   - a --[[ ]] comment of its own whose first line begins with its name
 *     (`--[[ glidemq_upsertScheduler — adds or replaces a scheduler.`), anywhere in the file; or
 *   - its section of the file's leading --[[ ]] comment: a section starts with a line beginning
 *     with the function's name (`  glidemq_finishMany — ...`) and runs to the next such line (a
 *     line that lists names, `glidemq_a, glidemq_b`, starts none). A file with one function may
 *     skip that line: its whole leading comment is the section.
 *   - In a section, one argument per line:
 *         ARGV[1]  consumer: the worker's consumer name.
 *         ARGV[2]  count: how many groups follow.
 *         ARGV[3..]  `count` groups, one per job, each these fields in order:
 *           group.jobId: the job.
 *           group.fence: the fence of its claim.
 *     Head arguments are numbered from 1 without gaps; `name` is the schema name exactly (an
 *     identifier: units go in the meaning, `delay: ms`, never `delay(ms):`). Group fields are
 *     `group.<name>:` lines in schema order; the `ARGV[n..]` intro line is optional, n must follow
 *     the last head argument. A function with no arguments says `ARGV  none.`
 *   - Also accepted: after an `ARGV[n..]` intro line, fields as `<any>.<name>:` or as indented bare
 *     `<name>:` lines, until a blank line or a Returns/Errors/KEYS/ARGV line. (So a continuation
 *     line inside that block must not begin with `word:`.)
 *   - Not accepted: lists on one line (`ARGV: a, b, c` or `ARGV[3..] groups of 7: a, b, ...`).
 *
 * The Lua is read with a small tokenizer (comments dropped, strings kept) and block counting
 * (function/do/if/repeat ... end/until): enough for these checks, not a Lua parser. When this test
 * cannot find what it looks for, it says so and fails rather than passing on nothing.
 */
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { LUA_ERRORS } from '../../src/engine/errors.js';
import { BroadcastKeys, MAX_GROUP_ID, QueueKeys, validateGroupId } from '../../src/engine/keys.js';
import { METRICS_RETENTION_MINUTES } from '../../src/engine/metrics.js';
import * as optionsModule from '../../src/engine/options.js';
import { encodeDedup, encodeJob, MAX_PRIORITY } from '../../src/engine/options.js';
import { MAX_SUBJECT, validateSubject } from '../../src/engine/subjects.js';

/** Fail above this many locals active at once in the main chunk: Lua 5.1 refuses the library at 200, so leave room. */
const LOCALS_BUDGET = 170;
/** dist/test/unit/ → the repository's lua/ (the same directory library.ts loads). */
const LUA_DIR = new URL('../../../lua/', import.meta.url);
/** The file whose keys are a broadcast's, not a queue's (BroadcastKeys in keys.ts). */
const BROADCAST_FILE = 'broadcast.lua';

// ---------------------------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------------------------

type TokKind = 'name' | 'string' | 'number' | 'op';
/** One token; for a string, `text` is its content (common escapes resolved). */
interface Tok {
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
interface Comment {
  text: string;
  line: number;
}

function tokenize(src: string, comments: Comment[] = []): Tok[] {
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

const isOp = (t: Tok | undefined, op: string): boolean => t?.kind === 'op' && t.text === op;
const isName = (t: Tok | undefined, name?: string): boolean =>
  t?.kind === 'name' && (name === undefined ? !KEYWORDS.has(t.text) : t.text === name);
/** `x.name` or `x:name`: a field or method, not the variable `name`. */
const isMember = (toks: Tok[], i: number): boolean => isOp(toks[i - 1], '.') || isOp(toks[i - 1], ':');

const OPENS: Record<string, string> = { '(': ')', '{': '}', '[': ']' };

/** Index of the bracket closing the one at `open` (last token when unbalanced). */
function matchClose(toks: Tok[], open: number): number {
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
function splitItems(toks: Tok[], open: number): [number, number][] {
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

// Blocks: every `function`, `do`, `if`, `repeat` opens one; `end` and `until` close one. (`while`
// and `for` open theirs with their `do`; `elseif`/`else` continue the `if`.)
const BLOCK_OPENERS = new Set(['function', 'do', 'if', 'repeat']);
const BLOCK_CLOSERS = new Set(['end', 'until']);

interface Blocks {
  /** Block depth before each token. */
  depth: number[];
  /** Whether each token is inside a function body (a `do ... end` of the main chunk is not). */
  inFunction: boolean[];
  problem?: string;
}

/** Block nesting of every token, and a problem when the blocks do not balance. */
function blockDepths(toks: Tok[]): Blocks {
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
function mainChunkLocalsPeak(toks: Tok[]): number {
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

interface Local {
  name: string;
  line: number;
}

/** Names declared by `local` statements at depth 0: still in scope after the file ends. */
function topLevelLocals(toks: Tok[], depth: number[]): Local[] {
  return toks.flatMap((t, i) => (depth[i] === 0 && isName(t, 'local') ? declaredAt(toks, i) : []));
}

/** Uses of the variable `name`: not a field (`x.name`), method or table key (`{ name = 1 }`). */
function variableUses(toks: Tok[], name: string): number[] {
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

// ---------------------------------------------------------------------------------------------
// lua/ and lua/ORDER
// ---------------------------------------------------------------------------------------------

interface LuaFile {
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

interface Order {
  helpers: string[];
  functions: string[];
  problems: string[];
}

interface Tree {
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

/** Reads ORDER as library.ts does (trimmed lines, `#` comments skipped), split at `# functions`. */
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

function loadTree(): Tree {
  const files = new Map<string, LuaFile>();
  for (const name of readdirSync(LUA_DIR).filter((f) => f.endsWith('.lua')).sort()) files.set(name, loadFile(name));
  return { order: readOrder(), files };
}

/** The files of the library, in ORDER (files ORDER names that do not exist are left out). */
function libraryFiles(tree: Tree): LuaFile[] {
  return [...tree.order.helpers, ...tree.order.functions].flatMap((f) => tree.files.get(f) ?? []);
}

// ---------------------------------------------------------------------------------------------
// Registrations, decodeArgs calls and schemas
// ---------------------------------------------------------------------------------------------

interface Registration {
  name: string;
  file: LuaFile;
  /** redis.register_function called directly instead of register(). */
  direct: boolean;
  line: number;
  /** Token range of the registration's argument list or table (its callback's body is inside). */
  open: number;
  close: number;
}

/** The file that implements register() (it alone may call redis.register_function). */
function definesRegister(file: LuaFile): boolean {
  return file.toks.some((t, i) => isName(t, 'register') && isName(file.toks[i - 1], 'function') && isName(file.toks[i - 2], 'local'));
}

/** function_name = '...' inside a redis.register_function{...} table. */
function tableFunctionName(toks: Tok[], open: number, close: number): string {
  for (let i = open; i < close; i++) {
    if (isName(toks[i], 'function_name') && isOp(toks[i + 1], '=') && toks[i + 2]?.kind === 'string') return toks[i + 2].text;
  }
  return '(unnamed)';
}

function findRegistrations(file: LuaFile): Registration[] {
  const { toks } = file;
  const out: Registration[] = [];
  const implementsRegister = definesRegister(file);
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (isName(t, 'register') && !isMember(toks, i) && isOp(toks[i + 1], '(') && toks[i + 2]?.kind === 'string') {
      out.push({ name: toks[i + 2].text, file, direct: false, line: t.line, open: i + 1, close: matchClose(toks, i + 1) });
    } else if (isName(t, 'register_function') && isOp(toks[i - 1], '.') && isName(toks[i - 2], 'redis') && !implementsRegister) {
      const open = i + 1;
      const close = matchClose(toks, open);
      const name = isOp(toks[open], '(') && toks[open + 1]?.kind === 'string' ? toks[open + 1].text : tableFunctionName(toks, open, close);
      out.push({ name, file, direct: true, line: t.line, open, close });
    }
  }
  return out;
}

interface DecodeCall {
  /** The function name passed as the first argument, when it is a string literal. */
  fnName?: string;
  index: number;
  line: number;
  items: [number, number][];
}

function findDecodeCalls(file: LuaFile): DecodeCall[] {
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

/** File-level (outside any function) `local NAME = { ... }` tables: name → token index of the `{`. */
function fileTables(file: LuaFile): Map<string, number> {
  const out = new Map<string, number>();
  const { toks, inFunction } = file;
  for (let i = 0; i < toks.length; i++) {
    if (!inFunction[i] && isName(toks[i], 'local') && isName(toks[i + 1]) && isOp(toks[i + 2], '=') && isOp(toks[i + 3], '{')) {
      out.set(toks[i + 1].text, i + 3);
    }
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

interface Schema {
  label: string;
  names: string[];
  problem?: string;
}

/**
 * Resolves a decodeArgs argument to its schema: an inline table, or a top-level local table of
 * the same file or of a helper file. undefined for `nil` or an absent argument.
 */
function resolveSchema(tree: Tree, file: LuaFile, item: [number, number] | undefined): Schema | undefined {
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

// ---------------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------------

interface HeaderArgs {
  head: string[];
  group: string[];
  none: boolean;
  problems: string[];
}

const HEAD_LINE = /^\s*ARGV\[(\d+)\]\s+([A-Za-z_]\w*)\s*:/;
const INTRO_LINE = /^\s*ARGV\[(\d+)\s*\.\.[^\]]*\](.*)$/;
const NONE_LINE = /\bARGV\b\s*:?\s*none\b/i;
const ANY_ARGV_INDEX = /^\s*ARGV\[/;
// ARGV not followed by an index, at the start of a line or after its KEYS clause / function name:
// an argument list on one line (the old format).
const LIST_LINE = /^\s*(?:(?:glidemq_\w+|KEYS\[\d+\]).*?)?\bARGV\b(?!\s*\[)/;
const PREFIXED_FIELD = /^\s+([A-Za-z_]\w*)\.([A-Za-z_]\w*)\s*:/;
const BARE_FIELD = /^\s+([a-z_]\w*)\s*:/;
const SECTION_STOP = /^\s*(?:Returns|Errors|KEYS|ARGV|Events|glidemq_)\b/;

/** Whether `line` begins with the name `fn` (not a longer name, and not a list `fn, glidemq_b`). */
function startsWithName(line: string, fn: string): boolean {
  const t = line.trimStart();
  return t.startsWith(fn) && !/^[\w,]/.test(t.slice(fn.length).trimStart().slice(0, 1) || ' ') && !/\w/.test(t[fn.length] ?? '');
}

/** The lines that describe `fn`: a --[[ ]] block that begins with its name, else its section of the file's header. */
function functionHeader(file: LuaFile, fn: string, fileFunctions: string[]): string[] | undefined {
  const own = file.comments.find((c) => startsWithName(c.text.split('\n')[0], fn));
  if (own) return own.text.split('\n');
  return file.header === undefined ? undefined : headerSection(file.header, fn, fileFunctions);
}

/** The header lines that describe `fn` (see HEADER FORMAT at the top). */
function headerSection(header: string, fn: string, fileFunctions: string[]): string[] | undefined {
  const lines = header.split('\n');
  const startOf = (name: string) => lines.findIndex((l) => startsWithName(l, name));
  const start = startOf(fn);
  if (start < 0) return fileFunctions.length === 1 ? lines : undefined;
  const ends = fileFunctions.map(startOf).filter((s) => s > start);
  return lines.slice(start, ends.length ? Math.min(...ends) : lines.length);
}

function parseHeaderArgs(section: string[]): HeaderArgs {
  const out: HeaderArgs = { head: [], group: [], none: false, problems: [] };
  let inGroup = false;
  // Bare `name:` fields are read only in a block that an `ARGV[n..]` line opened and that has no
  // prefixed field: elsewhere `Word:` is prose (`Time: ...`).
  let bareOk = false;
  for (const line of section) {
    const head = HEAD_LINE.exec(line);
    const intro = INTRO_LINE.exec(line);
    if (head) {
      if (Number(head[1]) !== out.head.length + 1) out.problems.push(`"${line.trim()}": expected ARGV[${out.head.length + 1}]`);
      if (out.group.length) out.problems.push(`"${line.trim()}": a head argument after the group fields`);
      out.head.push(head[2]);
      inGroup = false;
      bareOk = false;
    } else if (intro) {
      if (Number(intro[1]) !== out.head.length + 1) out.problems.push(`"${line.trim()}": the groups start at ARGV[${out.head.length + 1}..]`);
      if (/\w+\s*,\s*\w+\s*,/.test(intro[2])) out.problems.push(`"${line.trim()}": list the group fields one per line (group.<name>: ...)`);
      inGroup = true;
      bareOk = true;
    } else if (NONE_LINE.test(line)) {
      out.none = true;
    } else if (ANY_ARGV_INDEX.test(line)) {
      out.problems.push(`"${line.trim()}": not "ARGV[n]  name: meaning" (name an identifier, then a colon)`);
    } else if (LIST_LINE.test(line)) {
      out.problems.push(`"${line.trim()}": arguments listed on one line; list them one per line (ARGV[n]  name: ...)`);
    } else if (PREFIXED_FIELD.exec(line) && (inGroup || PREFIXED_FIELD.exec(line)![1] === 'group')) {
      out.group.push(PREFIXED_FIELD.exec(line)![2]);
      inGroup = true;
      bareOk = false;
    } else if (inGroup && (line.trim() === '' || SECTION_STOP.test(line))) {
      inGroup = false;
      bareOk = false;
    } else if (inGroup && bareOk && BARE_FIELD.test(line)) {
      out.group.push(BARE_FIELD.exec(line)![1]);
    }
  }
  if (out.none && out.head.length + out.group.length > 0) out.problems.push('says "ARGV none" and lists arguments');
  return out;
}

// ---------------------------------------------------------------------------------------------
// Key names the Lua builds (a small evaluator of `..` chains)
// ---------------------------------------------------------------------------------------------

// Key templates: the queue's base `<prefix>:{<queue>}` is written <base>, a broadcast's stream
// `<prefix>:{<name>}:broadcast` <bcast>, and any value the evaluator cannot know (an id, a
// group id, a subscription) `*`. A template ending in ':' or '{' is a prefix, not a key.
const QBASE = '<base>';
const BBASE = '<bcast>';

interface KeyScan {
  /** Templates of every key expression whose value starts with the family's base. */
  found: Set<string>;
  /** `k.<name>` reads of a name KEY_SUFFIX does not define (function files only). */
  unknownNames: string[];
}

interface EvalCtx {
  file: LuaFile;
  base: string;
  suffix: Map<string, string>;
  env: Map<string, string>;
  seeds: Map<string, string>;
  checkNames: boolean;
  scan: KeyScan;
}

const collapse = (s: string) => s.replace(/\*+/g, '*');

/** `string.sub(x, 1, #x - N)` (how helpers.lua and broadcast.lua strip ':meta'): x's value minus N chars. */
function stripCall(ctx: EvalCtx, items: [number, number][]): string {
  const toks = ctx.file.toks;
  if (items.length !== 3 || items[0][1] - items[0][0] !== 1) return '*';
  const v = ctx.env.get(toks[items[0][0]].text);
  const n = toks.slice(items[2][0], items[2][1]).map((t) => t.text).join(' ');
  const m = /^# (\w+) - (\d+)$/.exec(n);
  if (!v || !m || m[1] !== toks[items[0][0]].text) return '*';
  return v.slice(0, -Number(m[2]));
}

/** The value of a call: jobKey() is a job key by convention; `string.sub` as in stripCall. */
function callValue(ctx: EvalCtx, callee: string, open: number): string {
  if (callee === 'jobKey' && ctx.base === QBASE) return `${QBASE}${ctx.suffix.get('jobPrefix') ?? ':job:'}*`;
  if (callee === 'baseOf' && ctx.base === QBASE) return QBASE;
  if (callee === 'string.sub') return stripCall(ctx, splitItems(ctx.file.toks, open));
  return '*';
}

function pathValue(ctx: EvalCtx, path: string[], line: number): string {
  if (ctx.base === QBASE && path.length === 2 && path[0] === 'k') {
    const suffix = ctx.suffix.get(path[1]);
    if (suffix !== undefined) return QBASE + suffix;
    if (path[1] === 'base') return QBASE;
    if (path[1] === 'meta') return `${QBASE}:meta`;
    if (ctx.checkNames) ctx.scan.unknownNames.push(`${ctx.file.name}:${line}: k.${path[1]}`);
    return '*';
  }
  return ctx.env.get(path.join('.')) ?? '*';
}

/** One operand of `..`: a string, a variable or field path, a call, a parenthesised expression. */
function evalTerm(ctx: EvalCtx, i: number): { value: string; next: number } | undefined {
  const toks = ctx.file.toks;
  const t = toks[i];
  if (!t) return undefined;
  if (t.kind === 'string') return { value: t.text, next: i + 1 };
  if (t.kind === 'number') return { value: '*', next: i + 1 };
  if (isOp(t, '(')) return { value: '*', next: matchClose(toks, i) + 1 };
  if (!isName(t)) return undefined;
  const path = [t.text];
  let j = i + 1;
  while (isOp(toks[j], '.') && isName(toks[j + 1])) {
    path.push(toks[j + 1].text);
    j += 2;
  }
  let value = pathValue(ctx, path, t.line);
  if (isOp(toks[j], '(')) {
    value = callValue(ctx, path.join('.'), j);
    j = matchClose(toks, j) + 1;
  }
  // Anything after (an index, a method call, a field of a call's result) is not known here.
  while (isOp(toks[j], '[') || isOp(toks[j], '(') || ((isOp(toks[j], ':') || isOp(toks[j], '.')) && isName(toks[j + 1]))) {
    value = '*';
    j = isOp(toks[j], '[') || isOp(toks[j], '(') ? matchClose(toks, j) + 1 : j + 2;
  }
  return { value, next: j };
}

function evalChain(ctx: EvalCtx, i: number): { value: string; next: number } | undefined {
  const first = evalTerm(ctx, i);
  if (!first) return undefined;
  let { value, next } = first;
  while (isOp(ctx.file.toks[next], '..')) {
    const more = evalTerm(ctx, next + 1);
    if (!more) break;
    value = collapse(value + more.value);
    next = more.next;
  }
  return { value, next };
}

/** Records `name = value`; an unknown value never replaces a naming convention (jk, gk, metaKey). */
function assign(ctx: EvalCtx, name: string, value: string): void {
  if (value === '*' && ctx.seeds.has(name)) ctx.env.set(name, ctx.seeds.get(name)!);
  else ctx.env.set(name, value);
}

/** `local a, b = e1, e2`: each name gets the value of its expression when it is a `..` chain. */
function evalLocal(ctx: EvalCtx, i: number): void {
  const toks = ctx.file.toks;
  const names: string[] = [];
  let j = i + 1;
  while (isName(toks[j])) {
    names.push(toks[j].text);
    j += isOp(toks[j + 1], ',') ? 2 : 1;
  }
  if (!isOp(toks[j], '=')) return;
  j++;
  for (const name of names) {
    const r = evalChain(ctx, j);
    assign(ctx, name, r?.value ?? '*');
    if (!r || !isOp(toks[r.next], ',')) break;
    j = r.next + 1;
  }
}

/** The table a `{` builds when it is `local T = {` or `T = {`, so its fields become `T.field`. */
function tableNameAt(toks: Tok[], i: number): string | undefined {
  return isOp(toks[i], '{') && isOp(toks[i - 1], '=') && isName(toks[i - 2]) && !isMember(toks, i - 2) ? toks[i - 2].text : undefined;
}

function scanFileKeys(ctx: EvalCtx): void {
  const toks = ctx.file.toks;
  const tables: (string | undefined)[] = [];
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t.kind === 'op' && OPENS[t.text]) tables.push(t.text === '{' ? tableNameAt(toks, i) ?? '' : undefined);
    else if (t.kind === 'op' && (t.text === ')' || t.text === '}' || t.text === ']')) tables.pop();
    const inTable = tables.length > 0 && tables.at(-1) !== undefined;
    if (isName(t, 'local')) evalLocal(ctx, i);
    else if (isName(t) && !isMember(toks, i) && isOp(toks[i + 1], '=') && inTable && tables.at(-1)) {
      assign(ctx, `${tables.at(-1)}.${t.text}`, evalChain(ctx, i + 2)?.value ?? '*');
    } else if (isName(t) && !isMember(toks, i) && !inTable) {
      let j = i + 1;
      while (isOp(toks[j], '.') && isName(toks[j + 1])) j += 2;
      if (isOp(toks[j], '=')) {
        assign(ctx, toks.slice(i, j).map((x) => x.text).join(''), evalChain(ctx, j + 1)?.value ?? '*');
      }
    }
    if (isMember(toks, i)) continue;
    const r = evalChain(ctx, i);
    // A value with whitespace is a message naming a key, not a key.
    if (r && r.value.startsWith(ctx.base) && !/\s/.test(r.value) && !(ctx.base === QBASE && r.value === QBASE)) ctx.scan.found.add(r.value);
  }
}

/** KEY_SUFFIX in helpers.lua: name → suffix. */
function keySuffixes(tree: Tree): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of libraryFiles(tree)) {
    const open = fileTables(file).get('KEY_SUFFIX');
    if (open === undefined) continue;
    for (const [from, to] of splitItems(file.toks, open)) {
      const [k, eq, v] = file.toks.slice(from, to);
      if (to - from === 3 && isName(k) && isOp(eq, '=') && v.kind === 'string') out.set(k.text, v.text);
    }
  }
  return out;
}

function luaKeys(tree: Tree, family: 'queue' | 'broadcast'): KeyScan {
  const scan: KeyScan = { found: new Set(), unknownNames: [] };
  const suffix = keySuffixes(tree);
  const base = family === 'queue' ? QBASE : BBASE;
  const seeds = new Map<string, string>([['metaKey', `${base}:meta`]]);
  if (family === 'queue') {
    // Naming conventions of lua/: `jk` is a job hash key, `gk` a group's state key.
    seeds.set('jk', `${QBASE}${suffix.get('jobPrefix') ?? ':job:'}*`);
    if (suffix.has('groupPrefix')) seeds.set('gk', `${QBASE}${suffix.get('groupPrefix')}*}`);
    for (const s of suffix.values()) scan.found.add(QBASE + s);
    scan.found.add(`${QBASE}:meta`);
  }
  const functionFiles = new Set(tree.order.functions);
  for (const file of libraryFiles(tree)) {
    if ((file.name === BROADCAST_FILE) !== (family === 'broadcast')) continue;
    const ctx: EvalCtx = { file, base, suffix, env: new Map(seeds), seeds, checkNames: functionFiles.has(file.name), scan };
    scanFileKeys(ctx);
  }
  return scan;
}

/** Templates of every key a keys.ts class builds: its getters, and its one-argument methods. */
function tsKeys(sample: object, base: string, marker: string): Set<string> {
  const out = new Set<string>();
  const ARG = 'sampleArgument';
  const proto = Object.getPrototypeOf(sample) as object;
  for (const name of Object.getOwnPropertyNames(proto)) {
    const d = Object.getOwnPropertyDescriptor(proto, name)!;
    let value: unknown;
    if (d.get) value = d.get.call(sample);
    else if (name !== 'constructor' && typeof d.value === 'function' && d.value.length === 1) value = d.value.call(sample, ARG);
    // A value with '*' is a SCAN pattern (jobPattern), not a key.
    if (typeof value !== 'string' || value.includes('*') || !value.startsWith(base)) continue;
    out.add(marker + value.slice(base.length).replaceAll(ARG, '*'));
  }
  return out;
}

const isPrefix = (t: string) => t.endsWith(':') || t.endsWith('{');
/** A TS template as a pattern: `*` is one id (ids, group ids and subscriptions hold no ':'). */
const templateRe = (t: string) => new RegExp('^' + t.split('*').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^:]+') + '$');

/** Lua templates keys.ts cannot build, and keys.ts templates the Lua never builds. */
function diffKeys(lua: Set<string>, ts: Set<string>): { luaOnly: string[]; tsOnly: string[] } {
  const tsList = [...ts];
  const luaList = [...lua];
  const luaMatched = (l: string) =>
    isPrefix(l) ? tsList.some((t) => t.startsWith(l)) : tsList.some((t) => !isPrefix(t) && templateRe(t).test(l));
  const tsMatched = (t: string) =>
    isPrefix(t) ? luaList.some((l) => l.startsWith(t)) : luaList.some((l) => !isPrefix(l) && templateRe(t).test(l));
  return { luaOnly: luaList.filter((l) => !luaMatched(l)).sort(), tsOnly: tsList.filter((t) => !tsMatched(t)).sort() };
}

function keyDiffMessage(what: string, lua: Set<string>, ts: Set<string>, d: { luaOnly: string[]; tsOnly: string[] }): string {
  return [
    `${what}: the Lua and src/engine/keys.ts disagree.`,
    `  built by the Lua, not by keys.ts: ${d.luaOnly.join(', ') || '-'}`,
    `  built by keys.ts, not by the Lua: ${d.tsOnly.join(', ') || '-'}`,
    `  Lua:     ${[...lua].sort().join(', ')}`,
    `  keys.ts: ${[...ts].sort().join(', ')}`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

interface LuaLimit {
  value: number;
  where: string;
}

/** A file-level `local NAME = <number>` whose name matches, in any library file. */
function luaConstant(tree: Tree, name: RegExp): LuaLimit | undefined {
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
function luaLengthCheck(tree: Tree, fileName: string, operand: RegExp): LuaLimit | undefined {
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

/** An id of more than `limit` UTF-8 bytes but at most `limit` UTF-16 characters. */
const multibyteOver = (limit: number) => 'é'.repeat(Math.floor(limit / 2) + 1);

function throws(fn: () => unknown): boolean {
  try {
    fn();
    return false;
  } catch {
    return true;
  }
}

function note(message: string): void {
  console.log(`      note: ${message}`);
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

describe('lua/ contract (read as text, no server)', () => {
  let tree: Tree;
  let registrations: Registration[] = [];
  let loadError: unknown;
  try {
    tree = loadTree();
    registrations = libraryFiles(tree).flatMap(findRegistrations);
  } catch (err) {
    loadError = err;
  }

  it('reads lua/ and lua/ORDER, and every file tokenizes into balanced blocks', () => {
    if (loadError) throw loadError;
    const bad = [...tree.files.values()].filter((f) => f.blockProblem).map((f) => `${f.name}: ${f.blockProblem}`);
    expect(bad, `files this test cannot read (a mid-edit file, or a gap in the test's tokenizer):\n  ${bad.join('\n  ')}`).to.deep.equal([]);
  });
  if (loadError) return;

  describe('key names', () => {
    it('every queue key the Lua builds is one QueueKeys builds, and back', () => {
      const suffix = keySuffixes(tree);
      expect(suffix.size, 'KEY_SUFFIX table (local KEY_SUFFIX = { name = ":suffix", ... }) not found in a helper file').to.be.greaterThan(0);
      const lua = luaKeys(tree, 'queue').found;
      const ts = tsKeys(new QueueKeys('q', 'glide'), 'glide:{q}', QBASE);
      const d = diffKeys(lua, ts);
      expect(d, keyDiffMessage('queue keys', lua, ts, d)).to.deep.equal({ luaOnly: [], tsOnly: [] });
    });

    it('KEY_SUFFIX names that are QueueKeys getters have the same suffix', () => {
      const sample = new QueueKeys('q', 'glide') as unknown as Record<string, unknown>;
      const differ: string[] = [];
      for (const [name, suffix] of keySuffixes(tree)) {
        const ts = sample[name];
        if (typeof ts === 'string' && ts !== `glide:{q}${suffix}`) differ.push(`${name}: Lua '${suffix}', keys.ts '${ts.slice('glide:{q}'.length)}'`);
      }
      expect(differ, differ.join('\n')).to.deep.equal([]);
    });

    it('every broadcast key broadcast.lua builds is one BroadcastKeys builds, and back', () => {
      const lua = luaKeys(tree, 'broadcast').found;
      const ts = tsKeys(new BroadcastKeys('b', 'glide'), 'glide:{b}:broadcast', BBASE);
      const d = diffKeys(lua, ts);
      expect(d, keyDiffMessage('broadcast keys', lua, ts, d)).to.deep.equal({ luaOnly: [], tsOnly: [] });
    });

    it('function files read only queue key names KEY_SUFFIX defines (k.<name>)', () => {
      const unknown = luaKeys(tree, 'queue').unknownNames;
      expect(unknown, `k.<name> is nil at run time for a name KEY_SUFFIX lacks:\n  ${unknown.join('\n  ')}`).to.deep.equal([]);
    });
  });

  describe('limits shared by the Lua and the TypeScript', () => {
    it('MAX_PRIORITY', () => {
      const lua = luaConstant(tree, /^MAX_PRIORITY$/);
      expect(lua, 'no top-level local MAX_PRIORITY = <number> in lua/').to.not.equal(undefined);
      expect(lua!.value, `${lua!.where} vs src/engine/options.ts MAX_PRIORITY`).to.equal(MAX_PRIORITY);
    });

    it('metrics retention (minutes)', () => {
      const lua = luaConstant(tree, /^METRICS_RETENTION_MINUTES$/);
      expect(lua, 'no top-level local METRICS_RETENTION_MINUTES = <number> in lua/').to.not.equal(undefined);
      expect(lua!.value, `${lua!.where} vs src/engine/metrics.ts METRICS_RETENTION_MINUTES`).to.equal(METRICS_RETENTION_MINUTES);
    });

    describe('job id length (args.lua MAX_ID_LEN, in bytes)', () => {
      const lua = () => {
        const l = luaConstant(tree, /^MAX_ID_LEN$/);
        expect(l, 'no top-level local MAX_ID_LEN = <number> in lua/ (args.lua)').to.not.equal(undefined);
        return l!;
      };
      const job = (id: string) => () => encodeJob('n', {}, { jobId: id });

      it('encodeJob accepts an id of MAX_ID_LEN and refuses MAX_ID_LEN + 1 (ASCII)', () => {
        const { value, where } = lua();
        const ts = Object.entries(optionsModule).find(([k]) => /^MAX_(JOB_)?ID(_LEN)?$/.test(k));
        if (ts) expect(ts[1], `${where} vs options.ts ${ts[0]}`).to.equal(value);
        else {
          note(`options.ts exports no job id length constant (encodeJob checks a literal); pinned Lua ${where} = 256`);
          expect(value, `${where} changed: change encodeJob's check in options.ts and this pin together`).to.equal(256);
        }
        expect(throws(job('a'.repeat(value))), `encodeJob refuses an id of ${value} bytes`).to.equal(false);
        expect(throws(job('a'.repeat(value + 1))), `encodeJob accepts an id of ${value + 1} bytes`).to.equal(true);
      });

      it('encodeJob refuses an id over MAX_ID_LEN bytes in fewer characters (the Lua counts bytes)', () => {
        const { value, where } = lua();
        const id = multibyteOver(value);
        expect(throws(job(id)), `encodeJob accepts a ${Buffer.byteLength(id)}-byte id of ${id.length} characters that ${where} refuses`).to.equal(true);
      });
    });

    describe('group id length', () => {
      const lua = () => {
        const l = luaConstant(tree, /^MAX_GROUP_ID/) ?? luaLengthCheck(tree, 'group.lua', /(^|\.)id$/i);
        expect(l, 'no group id length limit found (a MAX_GROUP_ID* constant, or "#spec.id > N" in group.lua)').to.not.equal(undefined);
        return l!;
      };

      it('keys.ts MAX_GROUP_ID equals the Lua limit', () => {
        const { value, where } = lua();
        expect(MAX_GROUP_ID, `${where} vs keys.ts MAX_GROUP_ID`).to.equal(value);
        expect(throws(() => validateGroupId('g'.repeat(value)))).to.equal(false);
        expect(throws(() => validateGroupId('g'.repeat(value + 1)))).to.equal(true);
      });

      it('validateGroupId refuses an id over the limit in bytes in fewer characters (the Lua counts bytes)', () => {
        const { value, where } = lua();
        const id = multibyteOver(value);
        expect(throws(() => validateGroupId(id)), `validateGroupId accepts a ${Buffer.byteLength(id)}-byte id that ${where} refuses`).to.equal(true);
      });
    });

    it('dedup id length (dedup.lua vs options.ts encodeDedup, both in bytes)', () => {
      const l = luaConstant(tree, /DEDUP.*(ID|LEN)/) ?? luaLengthCheck(tree, 'dedup.lua', /id$/i);
      expect(l, 'no dedup id length limit found (a *DEDUP*ID* constant, or "#id > N" in dedup.lua)').to.not.equal(undefined);
      const { value, where } = l!;
      note(`options.ts exports no dedup id constant (encodeDedup checks a literal); pinned Lua ${where} = 512`);
      expect(value, `${where} changed: change encodeDedup in options.ts and this pin together`).to.equal(512);
      expect(throws(() => encodeDedup({ id: 'd'.repeat(value) }, 0)), `encodeDedup refuses ${value} bytes`).to.equal(false);
      expect(throws(() => encodeDedup({ id: 'd'.repeat(value + 1) }, 0)), `encodeDedup accepts ${value + 1} bytes`).to.equal(true);
      expect(throws(() => encodeDedup({ id: multibyteOver(value) }, 0)), 'encodeDedup counts characters, not bytes').to.equal(true);
    });

    it('subject length (subjects.ts MAX_SUBJECT vs broadcast.lua, when the Lua checks it)', () => {
      const l = luaConstant(tree, /SUBJECT/) ?? luaLengthCheck(tree, BROADCAST_FILE, /subject$/i);
      if (!l) {
        note(`broadcast.lua checks no subject length: subjects.ts MAX_SUBJECT = ${MAX_SUBJECT} is the only limit`);
        return;
      }
      expect(MAX_SUBJECT, `${l.where} vs subjects.ts MAX_SUBJECT`).to.equal(l.value);
      const s = multibyteOver(l.value);
      expect(throws(() => validateSubject(s)), `validateSubject accepts a ${Buffer.byteLength(s)}-byte subject that ${l.where} refuses`).to.equal(true);
    });
  });

  describe('each function header lists the ARGV its decodeArgs schemas decode', () => {
    for (const reg of registrations) {
      it(`${reg.name} (${reg.file.name})`, () => {
        const problems = argvProblems(tree, reg, registrations);
        expect(problems, `${reg.name} (${reg.file.name}):\n  ${problems.join('\n  ')}`).to.deep.equal([]);
      });
    }
  });

  describe('server time', () => {
    it('no function header lists a `now` argument (the functions read the server clock)', () => {
      const found: string[] = [];
      for (const file of tree.order.functions.flatMap((f) => tree.files.get(f) ?? [])) {
        (file.header ?? '').split('\n').forEach((line, i) => {
          // A listed name `now`, `now(ms)` anywhere, or `now` in a one-line ARGV list (old format).
          const named = HEAD_LINE.exec(line)?.[2] ?? PREFIXED_FIELD.exec(line)?.[2];
          const listed = LIST_LINE.test(line) && /(?:\bARGV\b:?|,)\s+now\b\s*(?:[,.(]|$)/.test(line);
          if (named === 'now' || listed || /\bnow\(ms\)/.test(line)) found.push(`${file.name}:${i + 1}: ${line.trim()}`);
        });
      }
      expect(found, `headers that still take the caller's clock:\n  ${found.join('\n  ')}`).to.deep.equal([]);
    });

    it('every function that uses `now` calls serverNow()', () => {
      const bad: string[] = [];
      for (const reg of registrations) {
        const body = reg.file.toks.slice(reg.open, reg.close + 1);
        const usesNow = body.some((t, i) => isName(t, 'now') && !isMember(body, i));
        if (usesNow && !body.some((t) => isName(t, 'serverNow'))) bad.push(`${reg.name} (${reg.file.name}:${reg.line})`);
      }
      expect(bad, `functions that use a \`now\` not read from serverNow():\n  ${bad.join('\n  ')}`).to.deep.equal([]);
    });
  });

  describe('registration', () => {
    it('every function is registered through register() (helpers.lua), none with redis.register_function', () => {
      const direct = registrations.filter((r) => r.direct).map((r) => `${r.name} (${r.file.name}:${r.line})`);
      expect(direct, `registered directly, so a raw Lua error escapes uncoded:\n  ${direct.join('\n  ')}`).to.deep.equal([]);
    });

    it('function names are unique, glidemq_-prefixed, and there is at least one', () => {
      expect(registrations.length).to.be.greaterThan(0);
      const names = registrations.map((r) => r.name);
      const dupes = names.filter((n, i) => names.indexOf(n) !== i);
      expect(dupes, 'registered twice (FUNCTION LOAD refuses the library)').to.deep.equal([]);
      expect(names.filter((n) => !n.startsWith('glidemq_')), 'not glidemq_-prefixed').to.deep.equal([]);
    });
  });

  describe('lua/ORDER', () => {
    it('has helpers, a "# functions" line, then functions, and lists every lua/*.lua once', () => {
      const listed = [...tree.order.helpers, ...tree.order.functions];
      const problems = [...tree.order.problems];
      for (const f of listed) if (!tree.files.has(f)) problems.push(`ORDER lists ${f}, which does not exist`);
      for (const f of tree.files.keys()) if (!listed.includes(f)) problems.push(`${f} is not in ORDER (it is not part of the library)`);
      for (const f of listed.filter((x, i) => listed.indexOf(x) !== i)) problems.push(`ORDER lists ${f} twice`);
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });

    it('helper files register no function; each function file registers one or more', () => {
      const problems: string[] = [];
      for (const f of tree.order.helpers) {
        for (const r of registrations.filter((x) => x.file.name === f)) problems.push(`helper ${f} registers ${r.name}: move it below "# functions"`);
      }
      for (const f of tree.order.functions) {
        if (tree.files.has(f) && !registrations.some((r) => r.file.name === f)) problems.push(`${f} is under "# functions" but registers nothing: it is a helper`);
      }
      expect(problems, problems.join('\n')).to.deep.equal([]);
    });

    it('no top-level local of a function file is used by another file', () => {
      const problems: string[] = [];
      const all = libraryFiles(tree);
      for (const f of tree.order.functions.flatMap((n) => tree.files.get(n) ?? [])) {
        for (const local of topLevelLocals(f.toks, f.depth)) {
          for (const other of all.filter((o) => o !== f)) {
            const uses = variableUses(other.toks, local.name);
            if (uses.length) problems.push(`${f.name}:${local.line} local ${local.name} is also used in ${other.name} (line ${uses.join(', ')})`);
          }
        }
      }
      expect(problems, `a function file's locals are its own (move shared ones into a helper file, or rename):\n  ${problems.join('\n  ')}`).to.deep.equal([]);
    });
  });

  describe('library size', () => {
    it(`the joined library's main chunk holds at most ${LOCALS_BUDGET} locals at once (Lua 5.1 refuses 200)`, async () => {
      // Joined exactly as the client loads it; the `#!lua` line is not Lua.
      const { LIBRARY_CODE } = await import('../../src/engine/library.js');
      const toks = tokenize(LIBRARY_CODE.replace(/^#![^\n]*\n/, ''));
      const { depth, problem } = blockDepths(toks);
      expect(problem, 'the joined library does not tokenize into balanced blocks').to.equal(undefined);
      const peak = mainChunkLocalsPeak(toks);
      const kept = topLevelLocals(toks, depth).length;
      console.log(`      main-chunk locals: at most ${peak} active at once, ${kept} still in scope at the end (budget ${LOCALS_BUDGET}, Lua's limit 200)`);
      // Largest first: the files whose locals a `do ... end` (function files) or a merge would free.
      const perFile = libraryFiles(tree)
        .map((f) => ({ name: f.name, kept: topLevelLocals(f.toks, f.depth).length }))
        .filter((f) => f.kept > 0)
        .sort((a, b) => b.kept - a.kept)
        .map((f) => `${f.name} ${f.kept}${tree.order.functions.includes(f.name) ? ' (function file)' : ''}`)
        .join(', ');
      expect(peak, `over budget; locals each file leaves in scope: ${perFile}`).to.be.at.most(LOCALS_BUDGET);
    });
  });

  describe('error codes', () => {
    it('the codes the Lua raises are exactly those errors.ts LUA_ERRORS maps', () => {
      const lua = new Set<string>();
      for (const file of libraryFiles(tree)) {
        for (const t of file.toks) {
          const m = t.kind === 'string' ? /^(ERR_[A-Z_]+)(?:\s|$)/.exec(t.text) : null;
          if (m) lua.add(m[1]);
        }
      }
      const ts = new Set(Object.keys(LUA_ERRORS));
      expect({ notMapped: [...lua].filter((c) => !ts.has(c)).sort(), neverRaised: [...ts].filter((c) => !lua.has(c)).sort() })
        .to.deep.equal({ notMapped: [], neverRaised: [] });
    });
  });
});

/** What is wrong with one function's ARGV contract (an empty list when nothing is). */
function argvProblems(tree: Tree, reg: Registration, all: Registration[]): string[] {
  const problems: string[] = [];
  const file = reg.file;
  const calls = findDecodeCalls(file);
  let mine = calls.filter((c) => c.fnName === reg.name);
  // A call whose name argument is not a literal counts when it sits in this function's body.
  if (!mine.length) mine = calls.filter((c) => c.fnName === undefined && c.index > reg.open && c.index < reg.close);
  const fileFunctions = all.filter((r) => r.file === file).map((r) => r.name);
  const section = functionHeader(file, reg.name, fileFunctions);
  if (!section) problems.push(`no header: neither a --[[ ]] block nor a section of the file's header starts with "${reg.name}"`);
  const header = parseHeaderArgs(section ?? []);
  problems.push(...header.problems.map((p) => `header: ${p}`));

  const inBody = calls.filter((c) => c.index > reg.open && c.index < reg.close && c.fnName !== undefined && c.fnName !== reg.name);
  for (const c of inBody) problems.push(`line ${c.line}: decodeArgs names '${c.fnName}', not '${reg.name}' (its errors would name the wrong function)`);
  if (!mine.length) return [...problems, 'not on decodeArgs'];
  if (mine.length > 1) return [...problems, `decodeArgs is called ${mine.length} times for it (lines ${mine.map((c) => c.line).join(', ')}): one layout per function`];

  const call = mine[0];
  const head = resolveSchema(tree, file, call.items[2]);
  const each = resolveSchema(tree, file, call.items[3]);
  const countItem = call.items[4];
  const countName = countItem && countItem[1] - countItem[0] === 1 && file.toks[countItem[0]].kind === 'string' ? file.toks[countItem[0]].text : undefined;
  if (!head) return [...problems, `line ${call.line}: decodeArgs has no head schema`];
  const unreadable = [head, each].filter((s) => s?.problem);
  if (unreadable.length) return [...problems, ...unreadable.map((s) => `schema ${s!.label}: ${s!.problem}`)];
  if (countName !== undefined && !head.names.includes(countName)) problems.push(`count argument '${countName}' is not in ${head.label}`);
  for (const n of [...head.names, ...(each?.names ?? [])]) {
    if (/^now(ms)?$/i.test(n)) problems.push(`decodes '${n}': a caller's clock (use serverNow())`);
  }

  const codeGroup = each?.names ?? [];
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  if (!same(head.names, header.head) || !same(codeGroup, header.group)) {
    const list = (xs: string[]) => (xs.length ? xs.join(', ') : '(none)');
    problems.push(
      `header ARGV differs from decodeArgs(${head.label}${each ? `, ${each.label}` : ''}):\n` +
        `    head   code:   ${list(head.names)}\n           header: ${list(header.head)}\n` +
        `    group  code:   ${list(codeGroup)}\n           header: ${list(header.group)}`,
    );
  }
  if (!header.none && head.names.length + codeGroup.length === 0) problems.push('header: a function with no arguments says "ARGV  none."');
  return problems;
}
