/**
 * The start/end log of processor runs across worker processes (one machine clock: Date.now() in
 * each), and the checks computed from it at every instant: runs of one job never overlap, a group
 * never has more runs at once than its limit, a one-at-a-time group starts its jobs in add order,
 * a worker never runs more processors than its concurrency. Plus the timeline of a job for a
 * failure message.
 */
import type { OutageLine } from './outage-worker.js';

export interface Run {
  id: string;
  worker: string;
  fence: string;
  start: number;
  /** Undefined while the processor still runs. */
  end?: number;
  /** running / activeCount the worker reported at the start. */
  running: number;
  active: number;
}

export interface WorkerEvent {
  worker: string;
  line: OutageLine;
}

export interface Window {
  label: string;
  from: number;
  to: number;
}

export class RunLog {
  readonly runs: Run[] = [];
  readonly events: WorkerEvent[] = [];
  /** Periods to show on timelines (server outages). */
  readonly windows: Window[] = [];

  constructor(readonly t0 = Date.now()) {}

  add(worker: string, line: OutageLine): void {
    if (line.e === 'start' && line.id) {
      this.runs.push({ id: line.id, worker, fence: line.fence ?? '', start: line.t, running: line.running ?? 0, active: line.active ?? 0 });
    } else if (line.e === 'end' && line.id) {
      // the earliest open run of this id and fence on this worker
      const run = this.runs.find((r) => r.worker === worker && r.id === line.id && r.fence === (line.fence ?? '') && r.end === undefined);
      if (run) run.end = line.t;
      else this.events.push({ worker, line: { ...line, e: 'end-without-start' } });
    } else {
      this.events.push({ worker, line });
    }
  }

  open(): Run[] {
    return this.runs.filter((r) => r.end === undefined);
  }

  runsOf(id: string): Run[] {
    return this.runs.filter((r) => r.id === id).sort((a, b) => a.start - b.start);
  }

  eventsNamed(e: string): WorkerEvent[] {
    return this.events.filter((ev) => ev.line.e === e);
  }

  /** Seconds since t0, to the millisecond. */
  at(t: number | undefined): string {
    return t === undefined ? 'still running' : `${((t - this.t0) / 1000).toFixed(3)}s`;
  }

  describeRun(r: Run): string {
    return `${r.worker} fence ${r.fence || '-'} [${this.at(r.start)} – ${this.at(r.end)}] (running ${r.running}, activeCount ${r.active} at start)`;
  }

  /** Every run of the job, its worker events, and the windows (outages) around them. */
  timeline(id: string): string {
    const runs = this.runsOf(id);
    const lines = runs.map((r, i) => `    run ${i + 1}: ${this.describeRun(r)}`);
    const evs = this.events
      .filter((ev) => ev.line.id === id)
      .map((ev) => `    ${this.at(ev.line.t)} ${ev.worker} ${ev.line.e}${ev.line.how ? ` ${ev.line.how}` : ''}${ev.line.status ? ` ${ev.line.status}` : ''}${ev.line.reason ? `: ${ev.line.reason}` : ''}`);
    const from = Math.min(...runs.map((r) => r.start), Infinity);
    const to = Math.max(...runs.map((r) => r.end ?? Infinity), -Infinity);
    const wins = this.windows
      .filter((w) => w.to >= from - 10_000 && w.from <= to + 10_000)
      .map((w) => `    ${w.label}: ${this.at(w.from)} – ${this.at(w.to)} (${w.to - w.from} ms)`);
    return [`  job ${id}:`, ...lines, ...evs, ...wins].join('\n');
  }
}

/** Pairs of runs of the same job whose [start, end] intervals overlap (an open run lasts forever). */
export function overlappingRuns(runs: Run[]): [Run, Run][] {
  const byId = new Map<string, Run[]>();
  for (const r of runs) byId.set(r.id, [...(byId.get(r.id) ?? []), r]);
  const out: [Run, Run][] = [];
  for (const list of byId.values()) {
    list.sort((a, b) => a.start - b.start);
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        if (list[j].start < (list[i].end ?? Infinity)) out.push([list[i], list[j]]);
      }
    }
  }
  return out;
}

/**
 * The most runs in progress at one instant, and the runs at that instant. An end and a start at
 * the same millisecond do not overlap (the end is counted first).
 */
export function mostAtOnce(runs: Run[]): { most: number; at: number; runs: Run[] } {
  const points: [number, number, Run][] = [];
  for (const r of runs) {
    points.push([r.start, 1, r]);
    if (r.end !== undefined) points.push([r.end, -1, r]);
  }
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const now = new Set<Run>();
  let best = { most: 0, at: 0, runs: [] as Run[] };
  for (const [t, d, r] of points) {
    if (d > 0) now.add(r);
    else now.delete(r);
    if (now.size > best.most) best = { most: now.size, at: t, runs: [...now] };
  }
  return best;
}

/**
 * For a group that runs one job at a time: the order its runs started in must follow the add order
 * (a job may run again right after itself, never after a later job started). Returns problems.
 */
export function orderProblems(runs: Run[], addOrder: string[]): string[] {
  const index = new Map(addOrder.map((id, i) => [id, i]));
  const sorted = [...runs].sort((a, b) => a.start - b.start);
  const problems: string[] = [];
  let highest = -1;
  let highestId = '';
  for (const r of sorted) {
    const i = index.get(r.id) ?? -1;
    if (i < highest) problems.push(`job ${r.id} (added #${i + 1}) started after job ${highestId} (added #${highest + 1})`);
    if (i > highest) {
      highest = i;
      highestId = r.id;
    }
  }
  const started = new Set(sorted.map((r) => r.id));
  const skipped = addOrder.filter((id) => !started.has(id));
  if (skipped.length > 0) problems.push(`jobs never started: ${skipped.join(', ')}`);
  return problems;
}
