/**
 * The functions lua/ registers: each register('glidemq_x', ...) call (helpers.lua's wrapper, which
 * turns a raised error into a coded reply) and each direct redis.register_function outside the file
 * that implements register(). The contract test checks names, the one wrapper, the ORDER split and,
 * through each registration's token range, what a function's body reads (decodeArgs, serverNow).
 */
import type { LuaFile } from './files.js';
import { isMember, isName, isOp, matchClose, type Tok } from './tokens.js';

export interface Registration {
  name: string;
  file: LuaFile;
  /** redis.register_function called directly instead of register(). */
  direct: boolean;
  line: number;
  /** Token range of the registration's argument list or table (its callback's body is inside). */
  open: number;
  close: number;
  /** Registered with the 'no-writes' flag (a read-only function). */
  readOnly: boolean;
}

/** register(name, fn, { 'no-writes' }): the flags table is the last thing before the closing paren. */
function flaggedNoWrites(toks: Tok[], close: number): boolean {
  return isOp(toks[close - 1], '}') && toks[close - 2]?.kind === 'string' && toks[close - 2].text === 'no-writes';
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

export function findRegistrations(file: LuaFile): Registration[] {
  const { toks } = file;
  const out: Registration[] = [];
  const implementsRegister = definesRegister(file);
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (isName(t, 'register') && !isMember(toks, i) && isOp(toks[i + 1], '(') && toks[i + 2]?.kind === 'string') {
      const close = matchClose(toks, i + 1);
      out.push({ name: toks[i + 2].text, file, direct: false, line: t.line, open: i + 1, close, readOnly: flaggedNoWrites(toks, close) });
    } else if (isName(t, 'register_function') && isOp(toks[i - 1], '.') && isName(toks[i - 2], 'redis') && !implementsRegister) {
      const open = i + 1;
      const close = matchClose(toks, open);
      const name = isOp(toks[open], '(') && toks[open + 1]?.kind === 'string' ? toks[open + 1].text : tableFunctionName(toks, open, close);
      out.push({ name, file, direct: true, line: t.line, open, close, readOnly: false });
    }
  }
  return out;
}

/** Whether a registered function's body uses a variable `now` without calling serverNow(). */
export function usesNowWithoutServerNow(reg: Registration): boolean {
  const body = reg.file.toks.slice(reg.open, reg.close + 1);
  const usesNow = body.some((t, i) => isName(t, 'now') && !isMember(body, i));
  return usesNow && !body.some((t) => isName(t, 'serverNow'));
}
