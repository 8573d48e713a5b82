/**
 * What `glidemq top` draws, as text: a snapshot of the queues, the history of their rates and the
 * terminal's size in, the lines out. No I/O and no clock here, so the layout is tested at any size
 * without a terminal (test/unit/top-screen.test.ts); commands/top.ts gathers and draws.
 *
 * Fitting a small terminal: columns go in order of importance (the queue, its backlog, failures
 * and throughput first; totals and the second sparkline last) and each is shown whole or not at
 * all; the width left over widens the sparklines, then long queue names. Queues that do not fit
 * the height are left off below a "+N more queues" line. No line is wider than the width and there
 * are never more lines than the height: a line too long would wrap, and one too many would scroll
 * the screen, and either makes the redraw flicker.
 */
import { colour, formatCount, formatDuration, formatRate, formatTime, padCell, plural, sparkline } from './output.js';

/** One queue in a snapshot. `null`: not known (the server has no such record, or not yet). */
export interface QueueRow {
  name: string;
  /** Jobs that wait, the queue paused or not. */
  waiting: number;
  active: number;
  delayed: number;
  prioritized: number;
  /** Jobs kept in the completed and failed sets (what removeOnComplete/-Fail leave). */
  completed: number;
  failed: number;
  paused: boolean;
  /** How long the oldest waiting job has waited (queue latency), ms. */
  oldestWaitingMs: number | null;
  /** Live workers on the queue. */
  workers: number | null;
  /** Completed and failed attempts per second over the last interval; null on the first snapshot. */
  completedPerSec: number | null;
  failedPerSec: number | null;
}

export interface TopSnapshot {
  /** The server (URL without its password) and the key prefix, for the title. */
  where: string;
  prefix: string;
  /** When it was taken, ms since the epoch. */
  at: number;
  intervalMs: number;
  queues: QueueRow[];
  /** Why the last refresh failed, for the footer (the numbers shown are the last good ones). */
  problem?: string;
}

/** How many samples a sparkline keeps: at one a second, the last half minute. */
export const HISTORY_SAMPLES = 30;

export interface RateHistory {
  completed: number[];
  failed: number[];
}

/** Each queue's recent rates, oldest first. */
export type TopHistory = Map<string, RateHistory>;

/** Adds the snapshot's rates to the history (at most `keep` per queue); forgets queues gone. */
export function recordRates(history: TopHistory, queues: QueueRow[], keep = HISTORY_SAMPLES): void {
  const present = new Set(queues.map((q) => q.name));
  for (const name of history.keys()) if (!present.has(name)) history.delete(name);
  for (const q of queues) {
    if (q.completedPerSec === null || q.failedPerSec === null) continue;
    const h = history.get(q.name) ?? { completed: [], failed: [] };
    h.completed = [...h.completed, q.completedPerSec].slice(-keep);
    h.failed = [...h.failed, q.failedPerSec].slice(-keep);
    history.set(q.name, h);
  }
}

export interface ScreenSize {
  width: number;
  height: number;
}

type SparkOf = keyof RateHistory;

interface Column {
  head: string;
  /** Lower comes first when the width is short; the queue name is always shown. */
  priority: number;
  right?: boolean;
  /** A sparkline of this rate: its width grows into what the other columns leave. */
  spark?: SparkOf;
  text?: (q: QueueRow) => string;
  paint?: (cell: string, q: QueueRow) => string;
}

const dash = (v: number | null, f: (n: number) => string) => (v === null ? '-' : f(v));
const redIf = (cell: string, on: boolean) => (on ? colour.red(cell) : cell);

/** Left to right as shown; `priority` decides which go when the width is short. */
const COLUMNS: Column[] = [
  { head: 'queue', priority: 0 },
  { head: 'waiting', priority: 1, right: true, text: (q) => formatCount(q.waiting) },
  { head: 'active', priority: 2, right: true, text: (q) => formatCount(q.active) },
  { head: 'delayed', priority: 8, right: true, text: (q) => formatCount(q.delayed) },
  { head: 'prio', priority: 11, right: true, text: (q) => formatCount(q.prioritized) },
  { head: 'failed', priority: 3, right: true, text: (q) => formatCount(q.failed), paint: (c, q) => redIf(c, q.failed > 0) },
  { head: 'oldest', priority: 7, right: true, text: (q) => dash(q.oldestWaitingMs, formatDuration) },
  { head: 'workers', priority: 6, right: true, text: (q) => dash(q.workers, String) },
  { head: 'done/s', priority: 4, right: true, text: (q) => formatRate(q.completedPerSec) },
  { head: '', priority: 5, spark: 'completed', paint: (c) => colour.green(c) },
  { head: 'fail/s', priority: 9, right: true, text: (q) => formatRate(q.failedPerSec), paint: (c, q) => redIf(c, (q.failedPerSec ?? 0) > 0) },
  { head: '', priority: 10, spark: 'failed', paint: (c) => colour.red(c) },
  { head: 'completed', priority: 12, right: true, text: (q) => formatCount(q.completed) },
];

const SPARK_MIN = 8;
/**
 * The queue column is never cut below this (unless the terminal is narrower): most names fit
 * whole, and a name is what the row is about.
 */
const QUEUE_MIN = 16;
const PAUSED = ' (paused)';

const width = (s: string) => Array.from(s).length;

function queueNatural(q: QueueRow): number {
  return width(q.name) + (q.paused ? PAUSED.length : 0);
}

/** The name, and " (paused)" (or " P" when narrow) for a paused queue, in `w` columns. */
function queueCell(q: QueueRow, w: number): string {
  if (!q.paused) return padCell(q.name, w);
  const mark = w >= PAUSED.length + 6 ? PAUSED : ' P';
  return padCell(padCell(q.name, Math.min(width(q.name), w - mark.length)) + mark, w);
}

interface Layout {
  columns: Column[];
  widths: number[];
  gap: number;
}

/**
 * Which columns fit `total` columns, and how wide each is, with two spaces between columns or
 * one.
 */
function layout(rows: QueueRow[], total: number, sparks: boolean): Layout {
  const candidates = COLUMNS.filter((c) => sparks || !c.spark);
  const natural = candidates.map((c) => {
    if (c.spark) return SPARK_MIN;
    if (!c.text) return Math.max(width(c.head), ...rows.map(queueNatural));
    return Math.max(width(c.head), ...rows.map((q) => width(c.text!(q))));
  });
  const attempt = (gap: number) => {
    const widths = candidates.map(() => 0);
    widths[0] = Math.min(natural[0], QUEUE_MIN, total);
    let used = widths[0];
    const order = candidates.map((_, i) => i).sort((a, b) => candidates[a].priority - candidates[b].priority);
    for (const i of order.slice(1)) {
      if (used + gap + natural[i] > total) break; // not a less important narrow column in its place
      widths[i] = natural[i];
      used += gap + natural[i];
    }
    let left = total - used;
    const grow = (i: number, upTo: number) => {
      const by = Math.max(0, Math.min(left, upTo - widths[i]));
      widths[i] += by;
      left -= by;
    };
    // The sparklines share what is left, up to the samples kept.
    const sparkCols = candidates.map((c, i) => (c.spark && widths[i] > 0 ? i : -1)).filter((i) => i >= 0);
    for (let k = 0; k < sparkCols.length; k++) grow(sparkCols[k], Math.min(HISTORY_SAMPLES, widths[sparkCols[k]] + Math.floor(left / (sparkCols.length - k))));
    grow(0, natural[0]);
    return { columns: candidates, widths, gap };
  };
  // The wider gap only when it shows as many columns and sparklines as long.
  const wide = attempt(2);
  const narrow = attempt(1);
  const shown = (l: Layout) => l.widths.filter((w) => w > 0).length;
  const sparkWidth = (l: Layout) => l.widths.reduce((sum, w, i) => (l.columns[i].spark ? sum + w : sum), 0);
  return shown(wide) > shown(narrow) || (shown(wide) === shown(narrow) && sparkWidth(wide) >= sparkWidth(narrow)) ? wide : narrow;
}

function headerLine(l: Layout): string {
  const cells = l.columns.map((c, i) => (l.widths[i] ? colour.bold(padCell(c.head, l.widths[i], c.right)) : null));
  return cells.filter((c) => c !== null).join(' '.repeat(l.gap));
}

function rowLine(l: Layout, q: QueueRow, history: TopHistory | undefined): string {
  const cells: string[] = [];
  l.columns.forEach((c, i) => {
    const w = l.widths[i];
    if (!w) return;
    let cell: string;
    if (c.spark) {
      const samples = (history?.get(q.name)?.[c.spark] ?? []).slice(-w);
      cell = padCell(samples.length ? sparkline(samples) : '', w, true); // new samples come in on the right
    } else if (!c.text) {
      cell = queueCell(q, w);
    } else {
      cell = padCell(c.text(q), w, c.right);
    }
    cells.push(c.paint && cell.trim() ? c.paint(cell, q) : cell);
  });
  return cells.join(' '.repeat(l.gap));
}

/** Trailing spaces dropped (the screen clears each line's end anyway). */
const tidy = (line: string) => line.replace(/ +$/, '');

/**
 * The one-shot table (stdout not a terminal): a header and a row per queue, every queue, no
 * sparklines (one snapshot has no history), fitted to `total` columns.
 */
export function renderTable(snapshot: TopSnapshot, total: number): string[] {
  const l = layout(snapshot.queues, total, false);
  return [headerLine(l), ...snapshot.queues.map((q) => rowLine(l, q, undefined))].map(tidy);
}

function sum(rows: QueueRow[], f: (q: QueueRow) => number | null): number | null {
  let s = 0;
  for (const q of rows) {
    const v = f(q);
    if (v === null) return null;
    s += v;
  }
  return s;
}

function titleLine(s: TopSnapshot, total: number): string {
  const left = `glidemq top · ${s.where} · prefix ${s.prefix}`;
  const right = formatTime(s.at);
  if (width(left) + 2 + width(right) <= total) return colour.bold(left) + ' '.repeat(total - width(left) - width(right)) + right;
  return colour.bold(padCell(left, total));
}

function totalsLine(s: TopSnapshot, total: number): string {
  const q = s.queues;
  const workers = sum(q, (x) => x.workers);
  const parts = [
    plural(q.length, 'queue'),
    `${formatCount(sum(q, (x) => x.waiting) ?? 0)} waiting`,
    `${formatCount(sum(q, (x) => x.active) ?? 0)} active`,
    `${formatCount(sum(q, (x) => x.failed) ?? 0)} failed`,
    `${formatRate(sum(q, (x) => x.completedPerSec))} done/s`,
    `${formatRate(sum(q, (x) => x.failedPerSec))} fail/s`,
    workers === null ? 'workers -' : plural(workers, 'worker'),
    `${formatCount(sum(q, (x) => x.delayed) ?? 0)} delayed`,
  ];
  // Whole parts only: a number cut in half reads as a different number.
  let line = '';
  for (const p of parts) {
    const next = line ? `${line} · ${p}` : p;
    if (width(next) > total) break;
    line = next;
  }
  return line || padCell(parts[0], total);
}

function footerLine(s: TopSnapshot, total: number): string {
  const keys = `q quit · refresh every ${formatDuration(s.intervalMs)}`;
  if (s.problem) return colour.yellow(padCell(`${s.problem} · ${keys}`, total).trimEnd());
  return colour.dim(padCell(`${keys} · rates per second over the last refresh`, total).trimEnd());
}

/**
 * The full screen: title, totals, then a row per queue under a header, and a footer with the keys
 * (and the last refresh's problem). At most `size.height` lines of at most `size.width` columns.
 */
export function renderScreen(s: TopSnapshot, history: TopHistory, size: ScreenSize): string[] {
  const total = Math.max(1, size.width);
  const height = Math.max(1, size.height);
  const top = [titleLine(s, total), totalsLine(s, total), ''];
  const footer = [footerLine(s, total)];
  // A short terminal loses the blank line, then the footer (unless it has a problem to say), then the totals.
  if (height - top.length - footer.length < 3) top.pop();
  if (height - top.length - footer.length < 3 && !s.problem) footer.pop();
  if (height - top.length - footer.length < 3) top.pop();
  if (height - top.length - footer.length < 2) top.length = 0;

  let body: string[];
  if (s.queues.length === 0) {
    body = [padCell(`no queues under prefix "${s.prefix}" yet: one appears with its first job or worker`, total).trimEnd()];
  } else {
    const room = Math.max(1, height - top.length - footer.length - 1); // the header takes a line
    const fits = s.queues.length <= room;
    const shown = fits ? s.queues : s.queues.slice(0, Math.max(0, room - 1));
    const l = layout(shown.length ? shown : s.queues.slice(0, 1), total, true);
    body = [headerLine(l), ...shown.map((q) => rowLine(l, q, history))];
    if (!fits) {
      const more = s.queues.length - shown.length;
      body.push(colour.dim(padCell(`+${more} more ${more === 1 ? 'queue' : 'queues'} (a taller terminal shows more; or name the queues)`, total).trimEnd()));
    }
  }
  return [...top, ...body, ...footer].slice(0, height).map(tidy);
}

/** The terminal's alternate screen with the cursor hidden, cleared: where the live view draws. */
export const ENTER_SCREEN = '\u001b[?1049h\u001b[?25l\u001b[H\u001b[2J';
/** Back to the normal screen as it was, the cursor shown again. */
export const LEAVE_SCREEN = '\u001b[?25h\u001b[?1049l';

const SGR = /\u001b\[[0-9;]*m/g;

/**
 * The bytes that turn the screen into `lines` without clearing it first (a clear shows a blank
 * screen for a moment: flicker): each line written at its row over the old one, the rest of a
 * shorter line cleared, then every row below the last cleared. A line as wide as the screen gets no
 * clear after it: the cursor waits on its last column there, and a clear would erase that column.
 */
export function frameBytes(lines: string[], size: ScreenSize): string {
  let out = '';
  lines.forEach((line, i) => {
    out += `\u001b[${i + 1};1H${line}`;
    if (width(line.replace(SGR, '')) < size.width) out += '\u001b[K';
  });
  if (lines.length < size.height) out += `\u001b[${lines.length + 1};1H\u001b[J`;
  return out;
}
