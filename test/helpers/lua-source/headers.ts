/**
 * The ARGV a function's header comment documents, read from the comments of its lua/ file so the
 * contract test can compare them with what its decodeArgs schemas decode (and find a header that
 * still takes the caller's clock).
 *
 * HEADER FORMAT (what the test reads). A function's header is, in this order of preference:
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
 */
import type { LuaFile, Tree } from './files.js';

export interface HeaderArgs {
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
export function functionHeader(file: LuaFile, fn: string, fileFunctions: string[]): string[] | undefined {
  const own = file.comments.find((c) => startsWithName(c.text.split('\n')[0], fn));
  if (own) return own.text.split('\n');
  return file.header === undefined ? undefined : headerSection(file.header, fn, fileFunctions);
}

/** The header lines that describe `fn` (see HEADER FORMAT above). */
function headerSection(header: string, fn: string, fileFunctions: string[]): string[] | undefined {
  const lines = header.split('\n');
  const startOf = (name: string) => lines.findIndex((l) => startsWithName(l, name));
  const start = startOf(fn);
  if (start < 0) return fileFunctions.length === 1 ? lines : undefined;
  const ends = fileFunctions.map(startOf).filter((s) => s > start);
  return lines.slice(start, ends.length ? Math.min(...ends) : lines.length);
}

export function parseHeaderArgs(section: string[]): HeaderArgs {
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

/** Lines of the function files' leading headers that list a `now` argument, as `file:line: text`. */
export function headerNowArguments(tree: Tree): string[] {
  const found: string[] = [];
  for (const file of tree.order.functions.flatMap((f) => tree.files.get(f) ?? [])) {
    (file.header ?? '').split('\n').forEach((line, i) => {
      // A listed name `now`, `now(ms)` anywhere, or `now` in a one-line ARGV list (old format).
      const named = HEAD_LINE.exec(line)?.[2] ?? PREFIXED_FIELD.exec(line)?.[2];
      const listed = LIST_LINE.test(line) && /(?:\bARGV\b:?|,)\s+now\b\s*(?:[,.(]|$)/.test(line);
      if (named === 'now' || listed || /\bnow\(ms\)/.test(line)) found.push(`${file.name}:${i + 1}: ${line.trim()}`);
    });
  }
  return found;
}
