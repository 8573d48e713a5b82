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

/** Many lines with one write (a big NDJSON enqueue prints an id per job). */
export function printLines(lines: string[]): void {
  if (lines.length) process.stdout.write(lines.join('\n') + '\n');
}

/** One JSON object per line, for commands that stream. */
export function printJsonLine(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
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
  /** On a TTY, word-wrap this column so the table fits the terminal width. */
  wrap?: number;
}

const ANSI = /\u001b\[[0-9;]*m/g;
const visibleLength = (s: string) => s.replace(ANSI, '').length;

/** Column widths that leave the wrapped column whatever the terminal has left (cells have 1 space padding each side). */
function fitWidths(head: string[], rows: (string | number)[][], wrap: number | undefined): (number | null)[] | undefined {
  const columns = process.stdout.columns;
  if (wrap === undefined || !process.stdout.isTTY || !columns) return undefined;
  const natural = head.map((h, i) => Math.max(visibleLength(h), ...rows.map((r) => visibleLength(String(r[i] ?? '')))) + 2);
  const others = natural.reduce((sum, w, i) => (i === wrap ? sum : sum + w), 0);
  const left = columns - others - (head.length + 1);
  if (left >= natural[wrap]) return undefined;
  return natural.map((_, i) => (i === wrap ? Math.max(20, left) : null));
}

export function table({ head, rows, numeric = [], wrap }: TableOptions): string {
  const colWidths = fitWidths(head, rows, wrap);
  TableClass ??= require('cli-table3') as typeof TableType;
  const t = new TableClass({
    head: head.map((h) => colour.bold(h)),
    style: { head: [], border: colourOn ? ['grey'] : [], compact: true },
    colAligns: head.map((_, i) => (numeric.includes(i) ? 'right' : 'left')),
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
    ...(colWidths ? { colWidths, wordWrap: true, wrapOnWordBoundary: true } : {}),
  });
  for (const r of rows) t.push(r.map((c) => String(c)));
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

/** A span of milliseconds for people: `850ms`, `12.3s`, `4m 05s`, `2h 10m`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)}m ${String(Math.floor((ms % 60_000) / 1000)).padStart(2, '0')}s`;
  return `${Math.floor(ms / 3_600_000)}h ${String(Math.floor((ms % 3_600_000) / 60_000)).padStart(2, '0')}m`;
}
