/**
 * The outage scenarios of issue 17 ("a server outage shorter than lockDuration never hands a
 * running job to a second run"), shared by test/integration/outage.test.ts (short form) and
 * test/load/outage-soak.test.ts (GLIDEMQ_SOAK=1: more rounds).
 *
 * runOutages: worker processes (outage-worker.ts) run long jobs of three kinds (stream, priority,
 * group: a maxConcurrency-1 group, a maxConcurrency-2 group and an ordered group) on one or more
 * "lanes" (a queue with its own worker settings); the server (appendfsync always) is SIGKILLed and
 * restarted on its AOF after 0.5-0.9 x lockDuration, several times, at moments drawn from a seeded
 * PRNG. Then every start/end line the processors wrote is checked (run-log.ts).
 *
 * runBlockedLoop: one worker process whose processors block its event loop with a busy loop of
 * 0.4 x lockDuration; nothing may be reclaimed.
 *
 * Both return the problems found (empty when everything held) and a summary; they never throw for
 * a broken guarantee, so the caller prints the seed with them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { GroupOptions } from '../../src/engine/producing/groups.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { uniqueQueue } from './engine.js';
import type { OutageJobData, OutageLine, OutageWorkerConfig } from './outage-worker.js';
import { Prng } from './prng.js';
import { mostAtOnce, orderProblems, overlappingRuns, RunLog, type Run } from './run-log.js';
import { type TestServer, waitFor } from './valkey.js';

const ENTRY = fileURLToPath(new URL('./outage-worker.js', import.meta.url));
const STALLED_REASON = 'job stalled more than maxStalledCount';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

/** When the server on `port` first answers PING with PONG (Date.now()), polled every 5 ms over raw TCP. */
async function firstPong(port: number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const pong = await new Promise<boolean>((resolve) => {
      const sock = connect(port, '127.0.0.1');
      const done = (ok: boolean) => {
        sock.destroy();
        resolve(ok);
      };
      sock.setTimeout(500, () => done(false));
      sock.once('error', () => done(false));
      sock.once('connect', () => sock.write('PING\r\n'));
      sock.once('data', (d: Buffer) => done(d.toString().startsWith('+PONG')));
    });
    const at = Date.now();
    if (pong) return at;
    await sleep(5);
  }
  return Date.now();
}

/** A worker process of the scenario, its lines fed into the lane's RunLog. */
class OutageProcess {
  readonly proc: ChildProcess;
  ready = false;
  /** Processors running now, from its start/end lines. */
  running = 0;
  stderr = '';
  readonly exited: Promise<void>;

  constructor(
    readonly label: string,
    cfg: OutageWorkerConfig,
    log: RunLog,
  ) {
    this.proc = spawn(process.execPath, [ENTRY], {
      env: { ...process.env, GLIDEMQ_OUTAGE_WORKER: JSON.stringify(cfg) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    createInterface({ input: this.proc.stdout! }).on('line', (text) => {
      let line: OutageLine;
      try {
        line = JSON.parse(text) as OutageLine;
      } catch {
        return;
      }
      if (line.e === 'ready') this.ready = true;
      if (line.e === 'start') this.running++;
      if (line.e === 'end') this.running--;
      log.add(label, line);
    });
    this.proc.stderr!.on('data', (chunk: Buffer) => {
      if (this.stderr.length < 20_000) this.stderr += chunk.toString();
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', () => resolve()));
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async waitReady(): Promise<void> {
    await waitFor(() => this.ready || !this.alive, `worker process ${this.label} to start`, 30_000);
    if (!this.ready) throw new Error(`worker process ${this.label} exited during start: ${this.stderr}`);
  }

  /** SIGKILL to its pid, and wait until it is gone. */
  async kill(): Promise<void> {
    if (this.alive) this.proc.kill('SIGKILL');
    await this.exited;
  }
}

type Kind = 'stream' | 'priority' | 'one' | 'two' | 'ord';

/** The groups of the scenario and their limits. */
const GROUPS: Record<'one' | 'two' | 'ord', { opts: GroupOptions; limit: number; ordered: boolean }> = {
  one: { opts: { id: 'one', maxConcurrency: 1 }, limit: 1, ordered: true }, // one at a time: starts follow add order too
  two: { opts: { id: 'two', maxConcurrency: 2 }, limit: 2, ordered: false },
  ord: { opts: { id: 'ord', ordered: true }, limit: 1, ordered: true },
};

export interface LaneSpec {
  label: string;
  stalledInterval: number;
  processes: number;
  concurrency: number;
}

export type JobMix = Record<Kind, number>;

/** One queue with its worker processes, the jobs added to it and the log of their runs. */
class Lane {
  readonly name: string;
  readonly queue: Queue;
  readonly log: RunLog;
  readonly workers: OutageProcess[] = [];
  readonly kinds = new Map<string, Kind>();
  readonly groupOrder = new Map<Kind, string[]>();
  /** Jobs whose timelines the failure message shows. */
  readonly show = new Set<string>();

  constructor(
    readonly spec: LaneSpec,
    server: TestServer,
    readonly lockDuration: number,
    t0: number,
  ) {
    this.name = uniqueQueue(`outage-${spec.label}`);
    this.queue = new Queue(this.name, { connection: server.url });
    this.queue.client.on('error', () => undefined); // the server goes away on purpose
    this.log = new RunLog(t0);
    for (let i = 0; i < spec.processes; i++) {
      const cfg: OutageWorkerConfig = {
        url: server.url,
        queue: this.name,
        concurrency: spec.concurrency,
        lockDuration,
        stalledInterval: spec.stalledInterval,
        blockTimeout: 1000,
        blockGapMs: Math.round(0.2 * lockDuration),
      };
      this.workers.push(new OutageProcess(`${spec.label}/w${i}`, cfg, this.log));
    }
  }

  get jobs(): number {
    return this.kinds.size;
  }

  async add(kind: Kind, data: OutageJobData, priority: number): Promise<void> {
    const opts = kind === 'priority' ? { priority } : kind === 'stream' ? {} : { group: GROUPS[kind].opts };
    const job = await this.queue.add(kind, data, opts);
    this.kinds.set(job.id, kind);
    if (kind in GROUPS) this.groupOrder.set(kind, [...(this.groupOrder.get(kind) ?? []), job.id]);
  }

  async finishedCount(): Promise<number> {
    const c = await this.queue.getJobCounts();
    return c.completed + c.failed;
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.kill()));
    await this.queue.close().catch(() => undefined);
  }
}

export interface Report {
  seed: number;
  problems: string[];
  summary: string;
  /** Where the whole log was written when there were problems. */
  dump?: string;
  totals: Totals;
}

export interface Totals {
  jobs: number;
  runs: number;
  reRuns: number;
  overlaps: number;
  outages: number;
  inFlightAtKills: number;
  stalledEvents: number;
}

interface CheckOptions {
  /** No worker event may say a claim was taken away ('stalled', 'lockLost'). */
  noReclaims: boolean;
}

/** Everything the run log and the queue say about one lane, as problems and a summary line. */
async function check(lane: Lane, opts: CheckOptions, problems: string[]): Promise<string> {
  const { log, spec } = lane;
  const jobsToShow = lane.show;
  const tag = `[${spec.label}]`;
  const ids = [...lane.kinds.keys()];

  // (2) every job completed; none failed as stalled
  const jobs = await Promise.all(ids.map((id) => lane.queue.getJob(id)));
  ids.forEach((id, i) => {
    const j = jobs[i];
    if (j?.state === 'completed') return;
    const why = j?.failedReason === STALLED_REASON ? ` AS STALLED ("${STALLED_REASON}", stalledCount ${j.stalledCount})` : j?.failedReason ? ` (${j.failedReason})` : '';
    problems.push(`${tag} job ${id} (${lane.kinds.get(id)}) ended ${j?.state ?? 'missing'}${why}, not completed`);
    jobsToShow.add(id);
  });

  // (1) no job runs twice at once; and no job runs twice at all, every worker having stayed alive
  const overlaps = overlappingRuns(log.runs);
  for (const [a, b] of overlaps) {
    problems.push(`${tag} job ${a.id} (${lane.kinds.get(a.id)}) RAN TWICE AT ONCE: ${log.describeRun(a)} and ${log.describeRun(b)}`);
    jobsToShow.add(a.id);
  }
  const runCount = new Map<string, number>();
  for (const r of log.runs) runCount.set(r.id, (runCount.get(r.id) ?? 0) + 1);
  let reRuns = 0;
  for (const [id, n] of runCount) {
    if (n < 2) continue;
    reRuns += n - 1;
    problems.push(`${tag} job ${id} (${lane.kinds.get(id)}) ran ${n} times though every worker stayed alive`);
    jobsToShow.add(id);
  }
  for (const id of ids) if (!runCount.has(id)) problems.push(`${tag} job ${id} (${lane.kinds.get(id)}) never ran`);

  // (3) group limits at every instant; one-at-a-time groups start their jobs in add order
  for (const [kind, order] of lane.groupOrder) {
    const g = GROUPS[kind as keyof typeof GROUPS];
    const inGroup = new Set(order);
    const runs = log.runs.filter((r) => inGroup.has(r.id));
    const most = mostAtOnce(runs);
    if (most.most > g.limit) {
      problems.push(`${tag} group ${g.opts.id} (limit ${g.limit}) had ${most.most} runs at once at ${log.at(most.at)}: ${most.runs.map((r) => `job ${r.id} on ${r.worker}`).join(', ')}`);
      most.runs.forEach((r) => jobsToShow.add(r.id));
    }
    if (g.ordered) {
      for (const p of orderProblems(runs, order)) problems.push(`${tag} group ${g.opts.id} out of order: ${p} (add order ${order.join(', ')})`);
    }
  }

  // (4) a worker never runs more processors than its concurrency, nor more than its activeCount says
  for (const w of lane.workers) {
    const mine = log.runs.filter((r) => r.worker === w.label);
    const most = mostAtOnce(mine);
    if (most.most > spec.concurrency) {
      problems.push(`${tag} ${w.label} (concurrency ${spec.concurrency}) ran ${most.most} processors at once at ${log.at(most.at)}: jobs ${most.runs.map((r) => r.id).join(', ')}`);
      most.runs.forEach((r) => jobsToShow.add(r.id));
    }
    for (const r of mine) {
      if (r.active > spec.concurrency) problems.push(`${tag} ${w.label}: activeCount ${r.active} > concurrency ${spec.concurrency} at the start of job ${r.id} (${log.at(r.start)})`);
      if (r.running > r.active) {
        problems.push(`${tag} ${w.label}: ${r.running} processors running but activeCount ${r.active} at the start of job ${r.id} (${log.at(r.start)}): a run shares a slot`);
        jobsToShow.add(r.id);
      }
    }
  }
  const overs = log.eventsNamed('over');
  if (overs.length > 0) {
    const o = overs[0];
    problems.push(`${tag} ${overs.length} samples saw a worker over its concurrency ${spec.concurrency}; first: ${o.worker} at ${log.at(o.line.t)} running ${o.line.running}, activeCount ${o.line.active}`);
  }
  for (const ev of log.eventsNamed('end-without-start')) problems.push(`${tag} ${ev.worker}: job ${ev.line.id} ended a run that never started (fence ${ev.line.fence})`);

  const stalled = log.eventsNamed('stalled');
  const lockLost = log.eventsNamed('lockLost');
  const lost = log.eventsNamed('lost');
  if (opts.noReclaims) {
    for (const ev of [...stalled, ...lockLost]) {
      problems.push(`${tag} ${ev.worker} reported ${ev.line.e}${ev.line.how ? ` (${ev.line.how})` : ''} for job ${ev.line.id} at ${log.at(ev.line.t)}: a claim of a live worker was reclaimed`);
      if (ev.line.id) jobsToShow.add(ev.line.id);
    }
  }
  const errors = log.eventsNamed('error');
  const exited = lane.workers.filter((w) => !w.alive);
  for (const w of exited) problems.push(`${tag} worker process ${w.label} exited during the run: ${w.stderr.slice(-2000)}`);

  const runs = log.runs.length;
  return (
    `${tag} ${ids.length} jobs, ${runs} runs, re-runs ${reRuns}, overlapping runs ${overlaps.length}, ` +
    `stalled events ${stalled.length}${stalled.length ? ` (${stalled.map((e) => `${e.line.id}:${e.line.how}`).join(' ')})` : ''}, ` +
    `lockLost ${lockLost.length}${lockLost.length ? ` (${lockLost.map((e) => e.line.id).join(' ')})` : ''}, lost ${lost.length}, worker error events ${errors.length}`
  );
}

/** Writes every run and event of the lanes to a file, for a failed run. */
function dumpLogs(seed: number, name: string, lanes: Lane[], header: string[]): string {
  const out: string[] = [...header, ''];
  for (const lane of lanes) {
    const log = lane.log;
    out.push(`lane ${lane.spec.label} (queue ${lane.name})`);
    const rows: [number, string][] = [];
    for (const r of log.runs) {
      rows.push([r.start, `${log.at(r.start)} start job ${r.id} (${lane.kinds.get(r.id)}) on ${r.worker} fence ${r.fence} running ${r.running} active ${r.active}`]);
      if (r.end !== undefined) rows.push([r.end, `${log.at(r.end)} end   job ${r.id} on ${r.worker} fence ${r.fence}`]);
    }
    for (const ev of log.events) if (ev.line.e !== 'error') rows.push([ev.line.t, `${log.at(ev.line.t)} ${ev.line.e} ${JSON.stringify(ev.line)} on ${ev.worker}`]);
    for (const w of log.windows) rows.push([w.from, `${log.at(w.from)} ---- ${w.label} begins (${w.to - w.from} ms)`], [w.to, `${log.at(w.to)} ---- ${w.label} ends`]);
    rows.sort((a, b) => a[0] - b[0]);
    out.push(...rows.map((r) => `  ${r[1]}`), '');
  }
  const path = join(tmpdir(), `glidemq-${name}-${seed}-${process.pid}.log`);
  writeFileSync(path, out.join('\n') + '\n');
  return path;
}

function finishReport(seed: number, name: string, lanes: Lane[], problems: string[], summary: string[], totals: Totals): Report {
  const details: string[] = [];
  for (const lane of lanes) {
    const wanted = [...lane.show].slice(0, 8);
    if (wanted.length > 0) details.push(`[${lane.spec.label}] timelines:`, ...wanted.map((id) => lane.log.timeline(id)));
  }
  const dump = problems.length > 0 ? dumpLogs(seed, name, lanes, summary) : undefined;
  return {
    seed,
    problems: problems.length > 0 ? [...problems, ...details] : [],
    summary: summary.join('\n'),
    dump,
    totals,
  };
}

export interface OutageSpec {
  lockDuration: number;
  outages: number;
  lanes: LaneSpec[];
  mix: JobMix;
  /** Run length of a job (ms), drawn in this range. */
  runMs: [number, number];
  /** Server down time as a fraction of lockDuration, drawn in this range. */
  down: [number, number];
  /** Server up time between two outages as a fraction of lockDuration. */
  up: [number, number];
}

/** Kills and restarts `server` (appendfsync always) under running workers; see the file comment. */
export async function runOutages(server: TestServer, seed: number, spec: OutageSpec): Promise<Report> {
  const prng = new Prng(seed);
  const L = spec.lockDuration;
  const t0 = Date.now();
  const lanes = spec.lanes.map((s) => new Lane(s, server, L, t0));
  const problems: string[] = [];
  const outages: { down: number; target: number; killedAt: number; backAt: number }[] = [];
  try {
    await Promise.all(lanes.flatMap((l) => l.workers.map((w) => w.waitReady())));

    // the same jobs in every lane, added one by one in a shuffled order (a group's add order is known)
    const kinds: Kind[] = (Object.keys(spec.mix) as Kind[]).flatMap((k) => Array<Kind>(spec.mix[k]).fill(k));
    for (let i = kinds.length - 1; i > 0; i--) {
      const j = prng.int(0, i);
      [kinds[i], kinds[j]] = [kinds[j], kinds[i]];
    }
    for (const kind of kinds) {
      const data = { ms: prng.int(spec.runMs[0], spec.runMs[1]) };
      const priority = prng.int(1, 5);
      for (const lane of lanes) await lane.add(kind, data, priority);
    }
    await waitFor(
      () => lanes.every((l) => l.workers.every((w) => w.running === l.spec.concurrency)),
      'every worker to run as many jobs as its concurrency',
      20_000,
    );

    // outages at moments drawn from the seed: the phase against heartbeat and stalled timers varies
    await sleep(prng.int(0, Math.round(L / 2)));
    let startCost = 60;
    for (let i = 0; i < spec.outages; i++) {
      const target = Math.round(L * (spec.down[0] + prng.next() * (spec.down[1] - spec.down[0])));
      const killedAt = Date.now(); // it serves nothing from the SIGKILL on
      await server.kill();
      await sleep(target - startCost - (Date.now() - killedAt)); // the outage itself: its length is what the test is about
      const startedAt = Date.now();
      // the moment it answers PING again, read by a raw probe (TestServer.start's own client can
      // wait a further second when it meets LOADING)
      const answered = firstPong(server.port, 15_000);
      await server.start();
      const backAt = Math.min(await answered, Date.now());
      // the next restart begins this much before its target (the last start's time, within reason)
      startCost = Math.min(backAt - startedAt, 150);
      outages.push({ down: backAt - killedAt, target, killedAt, backAt });
      for (const lane of lanes) lane.log.windows.push({ label: `outage ${i + 1}`, from: killedAt, to: backAt });
      if (i + 1 < spec.outages) await sleep(Math.round(L * (spec.up[0] + prng.next() * (spec.up[1] - spec.up[0]))) - (Date.now() - backAt));
    }

    // every job finishes (a safety net: a job left behind is reported with its timeline)
    const total = lanes.reduce((s, l) => s + l.jobs, 0);
    const longest = spec.runMs[1];
    const finishBy = Math.max(60_000, (spec.mix.ord + spec.mix.one) * longest + 4 * L);
    try {
      await waitFor(async () => (await Promise.all(lanes.map((l) => l.finishedCount()))).reduce((a, b) => a + b, 0) === total, `all ${total} jobs to finish`, finishBy, 100);
    } catch (err) {
      for (const lane of lanes) {
        const c = await lane.queue.getJobCounts().catch((e) => String(e));
        problems.push(`[${lane.spec.label}] ${(err as Error).message}: counts ${JSON.stringify(c)}`);
      }
    }
    // and every processor returned (a stale run may still be running after its job completed)
    try {
      await waitFor(() => lanes.every((l) => l.log.open().length === 0), 'every processor to return', longest + 10_000, 50);
    } catch {
      for (const lane of lanes) for (const r of lane.log.open()) problems.push(`[${lane.spec.label}] a run of job ${r.id} never returned: ${lane.log.describeRun(r)}`);
    }

    // premises: the outages were shorter than the lock and caught jobs running
    const inFlight = outages.map((o) => lanes.reduce((s, l) => s + l.log.runs.filter((r) => r.start < o.killedAt && (r.end ?? Infinity) > o.killedAt).length, 0));
    // (an outage the machine made longer than the lock is noted, not failed: the guarantees checked
    // here hold after it too once the server counts no down time against a claim)
    const tooLong = outages.map((o, i) => (o.down >= L ? `outage ${i + 1} lasted ${o.down} ms, not shorter than lockDuration ${L} (a slow restart on a busy machine)` : '')).filter(Boolean);
    outages.forEach((o, i) => {
      if (inFlight[i] === 0) problems.push(`premise: no job was running when outage ${i + 1} began`);
    });

    const lines: string[] = [];
    for (const lane of lanes) lines.push(await check(lane, { noReclaims: false }, problems));
    const summary = [
      `seed ${seed} (replay: GLIDEMQ_SEED=${seed}), lockDuration ${L}, lanes: ${spec.lanes.map((s) => `${s.label} stalledInterval ${s.stalledInterval}, ${s.processes} processes x concurrency ${s.concurrency}`).join('; ')}`,
      `outages (down ms, target ms, runs in flight at the kill): ${outages.map((o, i) => `${o.down}/${o.target}/${inFlight[i]}`).join(', ')}`,
      ...lines,
      ...tooLong.map((t) => `note: ${t}`),
    ];
    const totals: Totals = {
      jobs: total,
      runs: lanes.reduce((s, l) => s + l.log.runs.length, 0),
      reRuns: lanes.reduce((s, l) => s + l.log.runs.length - new Set(l.log.runs.map((r) => r.id)).size, 0),
      overlaps: lanes.reduce((s, l) => s + overlappingRuns(l.log.runs).length, 0),
      outages: outages.length,
      inFlightAtKills: inFlight.reduce((a, b) => a + b, 0),
      stalledEvents: lanes.reduce((s, l) => s + l.log.eventsNamed('stalled').length, 0),
    };
    return finishReport(seed, 'outage', lanes, problems, summary, totals);
  } finally {
    if (!server.proc) await server.start().catch(() => undefined); // an error mid-outage: queues close against a live server
    await Promise.all(lanes.map((l) => l.close()));
  }
}

export interface BlockSpec {
  lockDuration: number;
  stalledInterval: number;
  concurrency: number;
  jobs: number;
  /** The busy loop's length as a fraction of lockDuration. */
  block: number;
  /** Run length of a job (ms) beyond its busy loop, drawn in this range. */
  extraMs: [number, number];
}

/** One worker process whose processors block its event loop; see the file comment. */
export async function runBlockedLoop(server: TestServer, seed: number, spec: BlockSpec): Promise<Report> {
  const prng = new Prng(seed);
  const L = spec.lockDuration;
  const blockMs = Math.round(spec.block * L);
  const t0 = Date.now();
  const lane = new Lane({ label: 'blocked', stalledInterval: spec.stalledInterval, processes: 1, concurrency: spec.concurrency }, server, L, t0);
  const problems: string[] = [];
  try {
    await lane.workers[0].waitReady();
    const kinds: Kind[] = ['stream', 'priority', 'one', 'ord'];
    for (let i = 0; i < spec.jobs; i++) {
      const extra = prng.int(spec.extraMs[0], spec.extraMs[1]);
      const blockAtMs = prng.int(0, extra);
      await lane.add(kinds[i % kinds.length], { ms: blockMs + extra, blockMs, blockAtMs }, prng.int(1, 5));
    }
    const longest = blockMs + spec.extraMs[1];
    try {
      await waitFor(async () => (await lane.finishedCount()) === lane.jobs, `all ${lane.jobs} jobs to finish`, Math.max(30_000, 3 * spec.jobs * longest), 100);
    } catch (err) {
      problems.push(`${(err as Error).message}: counts ${JSON.stringify(await lane.queue.getJobCounts().catch((e) => String(e)))}`);
    }
    try {
      await waitFor(() => lane.log.open().length === 0, 'every processor to return', longest + 10_000, 50);
    } catch {
      for (const r of lane.log.open()) problems.push(`a run of job ${r.id} never returned: ${lane.log.describeRun(r)}`);
    }
    const blocks = lane.log.eventsNamed('block');
    if (blocks.length < spec.jobs) problems.push(`premise: ${blocks.length} busy loops ran, expected ${spec.jobs}`);
    const line = await check(lane, { noReclaims: true }, problems);
    const summary = [
      `seed ${seed} (replay: GLIDEMQ_SEED=${seed}), lockDuration ${L}, stalledInterval ${spec.stalledInterval}, concurrency ${spec.concurrency}, ` +
        `busy loops of ${blockMs} ms (longest measured ${Math.max(0, ...blocks.map((b) => b.line.ms ?? 0))} ms)`,
      line,
    ];
    const totals: Totals = {
      jobs: lane.jobs,
      runs: lane.log.runs.length,
      reRuns: lane.log.runs.length - new Set(lane.log.runs.map((r) => r.id)).size,
      overlaps: overlappingRuns(lane.log.runs).length,
      outages: 0,
      inFlightAtKills: 0,
      stalledEvents: lane.log.eventsNamed('stalled').length,
    };
    return finishReport(seed, 'blocked-loop', [lane], problems, summary, totals);
  } finally {
    await lane.close();
  }
}

/** The failure message of a report: the seed to replay, every problem, the summary and the dump file. */
export function failureText(r: Report): string {
  return [`seed ${r.seed}: replay with GLIDEMQ_SEED=${r.seed}`, ...r.problems, '', r.summary, r.dump ? `whole log: ${r.dump}` : ''].join('\n');
}

export type { Run };
