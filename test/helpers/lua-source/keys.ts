/**
 * The key names the Lua builds, read by a small evaluator of `..` chains over every library file:
 * KEY_SUFFIX (helpers.lua), `k.<name>` reads, jobKey()/baseOf(), and the naming conventions of
 * lua/ (`jk`, `gk`, `metaKey`). The contract test compares the templates found here with those
 * src/engine/shared/keys.ts builds (key-templates.ts), so a key one side renames fails without a server.
 */
import { BROADCAST_FILE, fileTables, libraryFiles, type LuaFile, type Tree } from './files.js';
import { isMember, isName, isOp, matchClose, OPENS, splitItems, type Tok } from './tokens.js';

// Key templates: the queue's base `<prefix>:{<queue>}` is written <base>, a broadcast's stream
// `<prefix>:{<name>}:broadcast` <bcast>, and any value the evaluator cannot know (an id, a
// group id, a subscription) `*`. A template ending in ':' or '{' is a prefix, not a key.
export const QBASE = '<base>';
export const BBASE = '<bcast>';

export interface KeyScan {
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
export function keySuffixes(tree: Tree): Map<string, string> {
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

export function luaKeys(tree: Tree, family: 'queue' | 'broadcast'): KeyScan {
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
