/**
 * The one place for CLI output: colour (TTY only, never with NO_COLOR), aligned tables, JSON,
 * spinners on stderr, and the one-line error format.
 */
import { Chalk } from 'chalk';
import { createRequire } from 'node:module';
import type TableType from 'cli-table3';
import type { Ora } from 'ora';

// Loaded on first use: a one-shot command such as `enqueue` should not pay for table and spinner code.
const require = createRequire(import.meta.url);
let TableClass: typeof TableType | undefined;

const colourOn = !!process.stdout.isTTY && !process.env.NO_COLOR;
export const colour = new Chalk({ level: colourOn ? 1 : 0 });
const errColour = new Chalk({ level: process.stderr.isTTY && !process.env.NO_COLOR ? 1 : 0 });

export function print(line = ''): void {
  process.stdout.write(line + '\n');
}

/** `n word` with the word in the plural unless n is 1 ("1 job", "3 jobs"); `many`: an irregular plural. */
export function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/**
 * A job as the CLI's --json prints it (CLI.md: `job`, `jobs`): its toJSON, where a field the job
 * does not have (undefined in the API, as in BullMQ) is null, so each key is always printed.
 */
export function jobJson(job: { toJSON(): object }): Record<string, unknown> {
  const o = job.toJSON() as Record<string, unknown>;
  for (const key of ['returnvalue', 'failedReason', 'processedOn', 'finishedOn']) o[key] ??= null;
  return o;
}

/** Many lines with one write (a big NDJSON enqueue prints an id per job). */
export function printLines(lines: string[]): void {
  if (lines.length) process.stdout.write(lines.join('\n') + '\n');
}

/** One JSON object per line, for commands that stream. */
export function printJsonLine(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}

/** A log record for services (`worker --log-json`): one JSON object per line on stderr, `ts` in ISO 8601 UTC. */
export function printLogJson(level: 'info' | 'warn' | 'error', event: string, fields: Record<string, unknown> = {}): void {
  process.stderr.write(JSON.stringify({ ts: new Date().toISOString(), level, event, ...fields }) + '\n');
}

export function info(line: string): void {
  if (process.stderr.isTTY) process.stderr.write(errColour.dim(line) + '\n');
}

/** A remark on stderr that scripts reading stdout should not get mixed in (e.g. next to --json). */
export function notice(line: string): void {
  process.stderr.write(errColour.dim(line) + '\n');
}

export function warn(line: string): void {
  process.stderr.write(errColour.yellow(`warning: ${line}`) + '\n');
}

export function printError(message: string): void {
  const oneLine = message.replace(/\s*\n\s*/g, ' ').trim();
  process.stderr.write(errColour.red(`glidemq: ${oneLine}`) + '\n');
}

export interface TableOptions {
  head: string[];
  rows: (string | number)[][];
  /** Right-align these column indexes (numbers). */
  numeric?: number[];
  /** When the table is too wide, these columns give way first (their text is wrapped). */
  wrap?: number | number[];
  /**
   * A column whose words are never broken (names to copy, such as queue names): when the table
   * cannot give it room for its longest word, each of its cells goes on a line of its own, across
   * the table, above the rest of its row.
   */
  whole?: number;
}

const ANSI = /\u001b\[[0-9;]*m/g;
const visibleLength = (s: string) => s.replace(ANSI, '').length;
const widest = (s: string) => Math.max(0, ...s.split('\n').map(visibleLength));

/**
 * The width output is fitted to: the terminal's; piped, $COLUMNS when the shell exports it, else
 * 80 (the same rule as help, help-style.ts).
 */
export function outputWidth(): number {
  if (process.stdout.isTTY && process.stdout.columns) return process.stdout.columns;
  const columns = Number(process.env.COLUMNS);
  return Number.isInteger(columns) && columns > 0 ? columns : 80;
}

/** The width lines on stderr are fitted to: the terminal's; else $COLUMNS, else 80 (as outputWidth). */
export function errorWidth(): number {
  if (process.stderr.isTTY && process.stderr.columns) return process.stderr.columns;
  const columns = Number(process.env.COLUMNS);
  return Number.isInteger(columns) && columns > 0 ? columns : 80;
}

/**
 * One message (a summary, a worker's start line) in lines of at most `width`, broken between
 * words, the lines after the first indented by two spaces so it still reads as one.
 */
export function hangingWrap(text: string, width = outputWidth()): string {
  const [first, ...rest] = wrapText(text, width);
  if (rest.length === 0) return first;
  return [first, ...wrapText(rest.join(' '), width - 2).map((l) => `  ${l}`)].join('\n');
}

/** Text in lines of at most `width`: broken between words, and a word longer than a line in pieces. */
export function wrapText(text: string, width: number): string[] {
  const w = Math.max(1, width);
  const out: string[] = [];
  for (const source of text.split('\n')) {
    let line = '';
    for (let word of source.split(/\s+/).filter(Boolean)) {
      if (line && line.length + 1 + word.length <= w) {
        line += ` ${word}`;
        continue;
      }
      if (line) out.push(line);
      while (word.length > w) {
        out.push(word.slice(0, w));
        word = word.slice(w);
      }
      line = word;
    }
    out.push(line);
  }
  return out;
}

/** Widths for `cols` summing to at most `left`: each between its floor and its natural width, as even as can be. */
function share(cols: number[], floors: number[], natural: number[], left: number): Map<number, number> | undefined {
  const at = (level: number) => new Map(cols.map((c) => [c, Math.min(natural[c], Math.max(floors[c], level))]));
  const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  if (sum(at(0)) > left) return undefined;
  let level = 0;
  while (level < Math.max(...cols.map((c) => natural[c])) && sum(at(level + 1)) <= left) level += 1;
  return at(level);
}

/**
 * Column widths (each with its 1-space padding on both sides) that make the table fit `width`, or
 * undefined when it fits as it is. The `wrap` columns give way first, then all; a column keeps
 * room for its longest word while it can (a time or an id is not broken), else words are broken.
 */
function fitWidths(natural: number[], words: number[], wrap: number[], width: number): number[] | undefined {
  const room = width - (natural.length + 1); // the borders
  if (natural.reduce((a, b) => a + b, 0) <= room) return undefined;
  const all = natural.map((_, i) => i);
  const wordFloors = natural.map((n, i) => Math.min(n, Math.max(3, words[i] + 2)));
  const tightFloors = natural.map((n) => Math.min(n, 3));
  for (const [cols, floors] of [[wrap, wordFloors], [all, wordFloors], [all, tightFloors]] as const) {
    if (cols.length === 0) continue;
    const left = room - natural.reduce((sum, w, i) => (cols.includes(i) ? sum : sum + w), 0);
    const shared = share([...cols], floors, natural, left);
    if (shared) return natural.map((n, i) => shared.get(i) ?? n);
  }
  return tightFloors;
}

/** A cell's text made to fit `width` (padding included): wrapped over lines. */
function fitCell(text: string, width: number): string {
  if (widest(text) <= width - 2) return text;
  return wrapText(text.replace(ANSI, ''), width - 2).join('\n');
}

const longestWord = (s: string) => Math.max(0, ...s.replace(ANSI, '').split(/\s+/).map((w) => w.length));

/**
 * An aligned table that fits outputWidth(): too wide, its `wrap` columns (else all) are wrapped;
 * when rows spread over several lines cannot be told apart by their first cell, rules separate them.
 */
export function table({ head, rows, numeric = [], wrap, whole }: TableOptions): string {
  const cells = rows.map((r) => head.map((_, i) => String(r[i] ?? '')));
  const natural = head.map((h, i) => Math.max(visibleLength(h), ...cells.map((r) => widest(r[i]))) + 2);
  const words = head.map((h, i) => Math.max(longestWord(h), ...cells.map((r) => longestWord(r[i]))));
  const colWidths = fitWidths(natural, words, wrap === undefined ? [] : ([] as number[]).concat(wrap), outputWidth());
  if (whole !== undefined && colWidths && colWidths[whole] - 2 < words[whole]) return spannedTable(head, cells, numeric, whole);
  const fitted = colWidths ? cells.map((r) => r.map((c, i) => fitCell(c, colWidths[i]))) : cells;
  // a row over several lines reads as one while its first cell starts it alone; else rules between rows
  const ruled = fitted.some((r) => r.some((c) => c.includes('\n'))) && fitted.some((r) => r[0] === '' || r[0].includes('\n'));
  TableClass ??= require('cli-table3') as typeof TableType;
  const t = new TableClass({
    head: head.map((h, i) => colour.bold(colWidths ? fitCell(h, colWidths[i]) : h)),
    style: { head: [], border: colourOn ? ['grey'] : [], compact: !ruled },
    colAligns: head.map((_, i) => (numeric.includes(i) ? 'right' : 'left')),
    ...(ruled ? {} : { chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' } }),
    ...(colWidths ? { colWidths } : {}),
  });
  for (const r of fitted) t.push(r);
  return t.toString();
}

/** table() with column `whole`'s cells each on a line of its own across the table, above its row. */
function spannedTable(head: string[], cells: string[][], numeric: number[], whole: number): string {
  const rest = cells.map((r) => r.map((c, i) => (i === whole ? '' : c)));
  const natural = head.map((h, i) => Math.max(visibleLength(h), ...rest.map((r) => widest(r[i]))) + 2);
  const words = head.map((h, i) => Math.max(longestWord(h), ...rest.map((r) => longestWord(r[i]))));
  const colWidths = fitWidths(natural, words, [], outputWidth()) ?? natural;
  const across = colWidths.reduce((a, b) => a + b, 0) + colWidths.length - 1;
  TableClass ??= require('cli-table3') as typeof TableType;
  const t = new TableClass({
    head: head.map((h, i) => colour.bold(fitCell(h, colWidths[i]))),
    style: { head: [], border: colourOn ? ['grey'] : [], compact: true },
    colAligns: head.map((_, i) => (numeric.includes(i) ? 'right' : 'left')),
    colWidths,
  });
  cells.forEach((r, j) => {
    t.push([{ content: fitCell(r[whole], across), colSpan: head.length }]);
    t.push(rest[j].map((c, i) => fitCell(c, colWidths[i])));
  });
  return t.toString();
}

const STATUS_COLOURS: Record<string, (s: string) => string> = {
  pass: (s) => colour.green(s),
  completed: (s) => colour.green(s),
  warn: (s) => colour.yellow(s),
  fail: (s) => colour.red(s),
  failed: (s) => colour.red(s),
  unknown: (s) => colour.magenta(s),
};

export function status(s: string): string {
  return (STATUS_COLOURS[s] ?? ((x: string) => x))(s);
}

/** `text` on one line, cut to `max` characters with `…` at the end when longer. */
export function ellipsis(text: string, max: number): string {
  const one = text.replace(/\s*\n\s*/g, ' ');
  if (max <= 0) return '';
  return one.length <= max ? one : `${one.slice(0, max - 1)}…`;
}

/**
 * Rows whose column `col` is cut with `…` so that table() of them fits `width` columns (its
 * borders and padding: 3 per column and 1). The other columns keep their natural width, the cut
 * one at least `min`.
 */
export function fitColumn(head: string[], rows: string[][], col: number, width = outputWidth(), min = 8): string[][] {
  const natural = head.map((h, i) => Math.max(visibleLength(h), ...rows.map((r) => visibleLength(r[i] ?? ''))));
  const others = natural.reduce((sum, w, i) => (i === col ? sum : sum + w + 3), 0);
  const room = Math.max(min, width - others - 4);
  return rows.map((r) => r.map((c, i) => (i === col ? ellipsis(c, room) : c)));
}

export interface Spinner {
  text(t: string): void;
  stop(): void;
}

/** A spinner on stderr, only when stderr is a TTY; otherwise a no-op. */
export function spinner(text: string): Spinner {
  if (!process.stderr.isTTY) return { text: () => undefined, stop: () => undefined };
  let s: Ora | undefined;
  let stopped = false;
  let current = text;
  void import('ora').then(({ default: ora }) => {
    if (!stopped) s = ora({ text: current, stream: process.stderr, color: 'cyan' }).start();
  });
  return {
    text: (t) => {
      current = t;
      if (s) s.text = t;
    },
    stop: () => {
      stopped = true;
      s?.stop();
    },
  };
}

const SPARKS = '▁▂▃▄▅▆▇█';

/** A one-line chart of the values, scaled to the largest; zeros are the lowest bar. */
export function sparkline(values: number[]): string {
  const max = Math.max(0, ...values);
  return values.map((v) => (max === 0 || v <= 0 ? SPARKS[0] : SPARKS[Math.min(7, Math.ceil((v / max) * 7))])).join('');
}

const DURATION_UNITS: [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
];

/**
 * The one duration style: `850ms`, `1.5s`, `12s`, then the two largest units with the smaller
 * one padded (`4m 05s`, `2h 10m`, `3d 04h`), a zero smaller unit left out (`5m`, `2h`).
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms < 999.5) return `${Math.round(ms)}ms`;
  if (ms < 59_950) return `${Number((ms / 1000).toFixed(1))}s`;
  const rest = Math.round(ms / 1000) * 1000;
  const i = DURATION_UNITS.findIndex(([, size]) => rest >= size);
  const [unit, size] = DURATION_UNITS[i];
  const [small, smallSize] = DURATION_UNITS[i + 1] ?? ['', 1];
  const next = Math.floor((rest % size) / smallSize);
  return `${Math.floor(rest / size)}${unit}${next ? ` ${String(next).padStart(2, '0')}${small}` : ''}`;
}

/** The same as formatDuration (its older name). */
export const formatMs = formatDuration;

/** `in 5m` for a span ahead, `5m ago` for one behind. */
export function formatRelative(deltaMs: number): string {
  return deltaMs >= 0 ? `in ${formatDuration(deltaMs)}` : `${formatDuration(-deltaMs)} ago`;
}

/** --utc (global flag): every time in ISO 8601 UTC rather than local time with the zone. */
let utcTimes = false;
export function useUtcTimes(on: boolean): void {
  utcTimes = on;
}

const two = (n: number) => String(n).padStart(2, '0');

/** Date, time of day and zone of `ms` in the style chosen (local or UTC). */
function timeParts(ms: number): { date: string; hm: string; s: string; zone: string } {
  const d = new Date(ms);
  if (utcTimes) {
    return { date: `${d.getUTCFullYear()}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}`, hm: `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}`, s: two(d.getUTCSeconds()), zone: 'UTC' };
  }
  const off = -d.getTimezoneOffset();
  const zone = `${off < 0 ? '-' : '+'}${two(Math.floor(Math.abs(off) / 60))}:${two(Math.abs(off) % 60)}`;
  return { date: `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`, hm: `${two(d.getHours())}:${two(d.getMinutes())}`, s: two(d.getSeconds()), zone };
}

/**
 * The one time style: local time with the zone, `2026-12-04 14:03:07 +01:00`; with --utc, ISO
 * 8601 in UTC, `2026-12-04T13:03:07Z`. Empty for a missing time (0, null, undefined).
 */
export function formatTime(ms: number | null | undefined): string {
  if (!ms) return '';
  const p = timeParts(ms);
  return utcTimes ? `${p.date}T${p.hm}:${p.s}Z` : `${p.date} ${p.hm}:${p.s} ${p.zone}`;
}

/** A time of day, `14:03` (`2026-12-04 14:03` withDate), for rows under a heading that names the zone. */
export function formatClock(ms: number, withDate = false): string {
  const p = timeParts(ms);
  return withDate ? `${p.date} ${p.hm}` : p.hm;
}

/** The zone times are shown in: `+01:00` (local), or `UTC` (--utc). */
export function timeZoneLabel(ms: number): string {
  return timeParts(ms).zone;
}

/** Whether two times fall on the same day in the zone times are shown in. */
export function sameDay(a: number, b: number): boolean {
  return timeParts(a).date === timeParts(b).date;
}

/** A rate per second for people: `-` when not known yet, `0`, `0.4`, `12`, `1.2k`. */
export function formatRate(perSec: number | null | undefined): string {
  if (perSec === null || perSec === undefined || !Number.isFinite(perSec)) return '-';
  if (perSec <= 0) return '0';
  if (perSec < 9.95) return perSec.toFixed(1);
  if (perSec < 999.5) return String(Math.round(perSec));
  return formatCount(Math.round(perSec));
}

/** A count in at most 6 characters, for narrow columns: `99999`, `123k`, `1.2M`, `45G`. */
export function formatCount(n: number): string {
  if (Math.abs(n) < 100_000) return String(n);
  for (const [unit, size] of [['G', 1e9], ['M', 1e6], ['k', 1e3]] as const) {
    const v = n / size;
    if (Math.abs(v) >= 1) return `${Math.abs(v) < 9.95 ? v.toFixed(1) : Math.round(v)}${unit}`;
  }
  return String(n);
}

/** `text` in exactly `width` columns: cut with `…` when longer, else padded (on the left when `right`). */
export function padCell(text: string, width: number, right = false): string {
  const chars = Array.from(text); // a sparkline or a name outside the BMP counts one column per character
  if (chars.length > width) return width <= 0 ? '' : `${chars.slice(0, width - 1).join('')}…`;
  const pad = ' '.repeat(width - chars.length);
  return right ? pad + text : text + pad;
}

/** A node of a tree drawn by treeLines: its text (plain, to measure and cut; `styled`, with colour, when it fits) and its children. */
export interface TreeNode {
  text: string;
  styled?: string;
  children: TreeNode[];
}

/**
 * A tree as lines, each child under its parent behind `├─ `, the last one behind `└─ `, every
 * line fitted to `width` (a line too long is cut with `…`, its colour dropped).
 */
export function treeLines(root: TreeNode, width = outputWidth()): string[] {
  const out: string[] = [];
  const fit = (lead: string, n: TreeNode) => {
    const room = width - Array.from(lead).length;
    out.push(Array.from(n.text).length <= room ? lead + (n.styled ?? n.text) : lead + ellipsis(n.text, room));
  };
  const walk = (n: TreeNode, lead: string) => {
    n.children.forEach((c, i) => {
      const last = i === n.children.length - 1;
      fit(`${lead}${last ? '└─ ' : '├─ '}`, c);
      walk(c, `${lead}${last ? '   ' : '│  '}`);
    });
  };
  fit('', root);
  walk(root, '');
  return out;
}
