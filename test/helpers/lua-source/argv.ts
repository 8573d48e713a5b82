/**
 * One function's ARGV contract: what its header documents (headers.ts) against what its one
 * decodeArgs call decodes (schemas.ts), as a list of problems for the contract test to report.
 */
import type { Tree } from './files.js';
import { functionHeader, parseHeaderArgs } from './headers.js';
import type { Registration } from './registrations.js';
import { findDecodeCalls, resolveSchema } from './schemas.js';

/** What is wrong with one function's ARGV contract (an empty list when nothing is). */
export function argvProblems(tree: Tree, reg: Registration, all: Registration[]): string[] {
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
