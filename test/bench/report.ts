/** The figures the benchmark reports, their targets, and the table (medians of the rounds). */
import Table from 'cli-table3';
import { median } from './measure.js';
import type { SystemName } from './systems.js';
import { SCALE_ROWS } from './scale-rows.js';

export interface Row {
  key: string;
  label: string;
  unit: string;
  better: 'higher' | 'lower';
  /** Target on the ratio glidemq/BullMQ (>= for higher-is-better, <= for lower), or an absolute check. */
  target?: { ratio?: number; max?: number; min?: number; text: string };
  digits?: number;
}

export const ROWS: Row[] = [
  { key: 'add.serial', label: 'add, one at a time (awaited)', unit: 'jobs/s', better: 'higher' },
  { key: 'add.bulk', label: 'add, bulk (1,000 per call)', unit: 'jobs/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  { key: 'add.ndjson', label: 'glidemq enqueue --ndjson (vs BullMQ addBulk)', unit: 'jobs/s', better: 'higher', target: { ratio: 2.5, text: '>= 2.5x' } },
  { key: 'proc.c1', label: 'process backlog, concurrency 1', unit: 'jobs/s', better: 'higher' },
  { key: 'proc.c10', label: 'process backlog, concurrency 10', unit: 'jobs/s', better: 'higher', target: { ratio: 2.5, text: '>= 2.5x' } },
  { key: 'proc.c50', label: 'process backlog, concurrency 50', unit: 'jobs/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  { key: 'lat.p50', label: 'latency p50 at 500 jobs/s, c=10', unit: 'ms', better: 'lower', digits: 2 },
  { key: 'lat.p99', label: 'latency p99 at 500 jobs/s, c=10', unit: 'ms', better: 'lower', target: { ratio: 1, text: '<= 1x' }, digits: 2 },
  // Delays of 100–1000 ms while a worker waits; due and start both read from the server's TIME.
  { key: 'delay.p50', label: 'delayed job start, lateness p50 (100–1000 ms delays)', unit: 'ms', better: 'lower', digits: 1 },
  { key: 'delay.p99', label: 'delayed job start, lateness p99 (100–1000 ms delays)', unit: 'ms', better: 'lower', target: { max: 50, text: '<= 50 ms' }, digits: 1 },
  { key: 'flow.add', label: 'flows added, a parent and 10 children (8 in flight)', unit: 'flows/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  { key: 'flow.e2e', label: 'a parent and 100 children, add -> parent done', unit: 'ms', better: 'lower', target: { ratio: 0.5, text: '<= 0.5x (2x faster)' } },
  { key: 'flow.cpu', label: 'server CPU per flow of 10 children, add -> done', unit: 'µs', better: 'lower', target: { ratio: 0.5, text: '<= 0.5x' } },
  { key: 'cost.cmds', label: 'client commands per job (c=10)', unit: 'cmds', better: 'lower', target: { max: 1.05, text: '~1 (glidemq)' }, digits: 2 },
  { key: 'cost.cpu', label: 'server CPU per job (c=10, INFO cpu)', unit: 'µs', better: 'lower', target: { ratio: 0.45, text: '<= 0.45x' }, digits: 1 },
  { key: 'cost.client', label: 'client CPU per job (c=10, worker process)', unit: 'µs', better: 'lower', digits: 1 },
  { key: 'cost.script', label: 'function/script time per job (commandstats)', unit: 'µs', better: 'lower', digits: 1 },
  { key: 'cost.calls', label: 'server-side calls per job (incl. inside scripts)', unit: 'calls', better: 'lower', digits: 1 },
  { key: 'events.c10', label: 'process c=10, a QueueEvents listening', unit: 'jobs/s', better: 'higher' },
  { key: 'events.cpu', label: 'server CPU per job (c=10, a QueueEvents listening)', unit: 'µs', better: 'lower', digits: 1 },
  { key: 'mem.job', label: 'memory per waiting job (100-byte payload)', unit: 'bytes', better: 'lower', target: { ratio: 1, text: '<= 1x' } },
  // A no-op processor file, run in each system's sandbox (BullMQ: its Worker given the file, and useWorkerThreads).
  { key: 'sandbox.process', label: 'sandboxed processing at c=10, no-op processor, processes', unit: 'jobs/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  { key: 'sandbox.thread', label: 'sandboxed processing at c=10, no-op processor, threads', unit: 'jobs/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  { key: 'dur.always', label: 'process c=10, appendfsync always', unit: 'jobs/s', better: 'higher' },
  { key: 'dur.everysec', label: 'process c=10, appendfsync everysec', unit: 'jobs/s', better: 'higher' },
  { key: 'dur.off', label: 'process c=10, appendonly no', unit: 'jobs/s', better: 'higher' },
  // Node's own start varies a lot between machines (NODE_EXTRA_CA_CERTS, disk): the target is on
  // what the program adds to a bare `node -e 0` timed right before it in the same round.
  { key: 'cli.one', label: 'one `glidemq enqueue` minus a bare `node -e 0` (vs BullMQ one-job script)', unit: 'ms', better: 'lower', target: { max: 60, text: '<= 60 ms' } },
  { key: 'cli.wall', label: 'one `glidemq enqueue`, wall time (vs BullMQ one-job script)', unit: 'ms', better: 'lower' },
  // Through the bench's delay proxy (delay-proxy.ts), calibrated so that a PING round trip takes
  // 2 × the delay longer than direct; the run's notes give the round trips it measured.
  { key: 'net.c1', label: 'process c=1 via proxy (+0.5 ms each way)', unit: 'jobs/s', better: 'higher', target: { ratio: 1.3, text: '>= 1.3x' } },
  { key: 'net.c10', label: 'process c=10 via proxy (+0.5 ms each way)', unit: 'jobs/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  { key: 'net.c50', label: 'process c=50 via proxy (+0.5 ms each way)', unit: 'jobs/s', better: 'higher', target: { ratio: 2.5, text: '>= 2.5x' } },
  { key: 'net.c10.near', label: 'process c=10 via proxy (+0.1 ms each way, same zone)', unit: 'jobs/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  { key: 'tls.c10', label: 'process c=10 over TLS (rediss:// on loopback)', unit: 'jobs/s', better: 'higher', target: { ratio: 2, text: '>= 2x' } },
  // glidemq against itself: the "BullMQ" column holds glidemq's c=10 rate in the same round (test/bench/batch-figures.ts)
  { key: 'batch.s50', label: 'batch processing, size 50, no-op (vs glidemq c=10)', unit: 'jobs/s', better: 'higher', target: { ratio: 3, text: ">= 3x glidemq's c=10" } },
  // glidemq against itself: the "BullMQ" column holds glidemq's c=10 rate without the option, in the same round (test/bench/trace-figures.ts)
  { key: 'trace.off', label: 'process c=10, telemetry: false (vs glidemq c=10 without it)', unit: 'jobs/s', better: 'higher', target: { ratio: 0.9, text: '~1x (no cost)' } },
  { key: 'trace.on', label: 'process c=10, telemetry on, SDK batch processor (vs glidemq c=10 without it)', unit: 'jobs/s', better: 'higher' },
  // Confirmed writes, glidemq against itself: the "BullMQ" column holds glidemq unconfirmed on appendfsync everysec (test/bench/confirm-figures.ts)
  { key: 'confirm.add.always', label: 'add one at a time, unconfirmed, appendfsync always (vs unconfirmed everysec)', unit: 'jobs/s', better: 'higher' },
  { key: 'confirm.add.fsync', label: 'add one at a time, confirm fsync, appendfsync always (vs unconfirmed everysec)', unit: 'jobs/s', better: 'higher' },
  { key: 'confirm.add.repl', label: 'add one at a time, confirm replicas: 1, local replica (vs unconfirmed everysec)', unit: 'jobs/s', better: 'higher' },
  { key: 'confirm.proc.always', label: 'process c=10, unconfirmed, appendfsync always (vs unconfirmed everysec)', unit: 'jobs/s', better: 'higher' },
  { key: 'confirm.proc.fsync', label: 'process c=10, confirm fsync, appendfsync always (vs unconfirmed everysec)', unit: 'jobs/s', better: 'higher' },
  { key: 'confirm.proc.repl', label: 'process c=10, confirm replicas: 1, local replica (vs unconfirmed everysec)', unit: 'jobs/s', better: 'higher' },
  ...SCALE_ROWS,
];

export type Results = Map<string, Record<SystemName, number[]>>;

export function record(results: Results, key: string, sys: SystemName, value: number): void {
  let r = results.get(key);
  if (!r) results.set(key, (r = { glidemq: [], BullMQ: [] }));
  r[sys].push(value);
}

function fmt(v: number, digits = 0): string {
  if (!Number.isFinite(v)) return '-';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export interface Verdict {
  row: Row;
  glidemq: number;
  bullmq: number;
  ratio: number;
  met: boolean | undefined;
}

export function verdicts(results: Results): Verdict[] {
  const out: Verdict[] = [];
  for (const row of ROWS) {
    const r = results.get(row.key);
    if (!r) continue;
    const g = median(r.glidemq);
    const b = median(r.BullMQ);
    // Paired: each round measures both systems back to back, so the median of the per-round
    // ratios is steadier than the ratio of medians when the machine's speed drifts between rounds.
    const pairs = r.glidemq.slice(0, r.BullMQ.length).map((v, i) => v / r.BullMQ[i]);
    const ratio = median(pairs);
    let met: boolean | undefined;
    if (row.target?.ratio !== undefined && Number.isFinite(ratio)) met = row.better === 'higher' ? ratio >= row.target.ratio : ratio <= row.target.ratio;
    if (row.target?.max !== undefined && Number.isFinite(g)) met = g <= row.target.max;
    if (row.target?.min !== undefined && Number.isFinite(g)) met = g >= row.target.min;
    out.push({ row, glidemq: g, bullmq: b, ratio, met });
  }
  return out;
}

export function renderTable(results: Results, rounds: number): string {
  const t = new Table({
    head: ['figure', 'unit', 'glidemq', 'BullMQ', 'glidemq/BullMQ', 'target'],
    colAligns: ['left', 'left', 'right', 'right', 'right', 'left'],
    style: { head: [], border: [] },
  });
  for (const v of verdicts(results)) {
    const mark = v.met === undefined ? '' : v.met ? ' met' : ' NOT met';
    t.push([v.row.label, v.row.unit, fmt(v.glidemq, v.row.digits), fmt(v.bullmq, v.row.digits), Number.isFinite(v.ratio) ? `${v.ratio.toFixed(2)}x` : '-', v.row.target ? v.row.target.text + mark : '']);
  }
  return `${t.toString()}\nmedians of ${rounds} round(s); ratio = median over the rounds of glidemq / BullMQ in that round`;
}

/** A markdown version of the same table, for the README. */
export function renderMarkdown(results: Results): string {
  const lines = ['| figure | unit | glidemq | BullMQ | glidemq/BullMQ | target |', '|---|---|--:|--:|--:|---|'];
  for (const v of verdicts(results)) {
    const mark = v.met === undefined ? '' : v.met ? ' ✓' : ' ✗';
    lines.push(`| ${v.row.label} | ${v.row.unit} | ${fmt(v.glidemq, v.row.digits)} | ${fmt(v.bullmq, v.row.digits)} | ${Number.isFinite(v.ratio) ? v.ratio.toFixed(2) + '×' : '-'} | ${v.row.target ? v.row.target.text + mark : ''} |`);
  }
  return lines.join('\n');
}
