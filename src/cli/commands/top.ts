/**
 * `glidemq top` (`dash`): every queue under the prefix (or the ones named), live on the terminal's
 * alternate screen until q; a one-shot table when stdout is not a terminal, one JSON snapshot with
 * --json. The numbers come from the engine (counts, metrics, the worker registry, the oldest
 * waiting job); the screen is top-screen.ts.
 */
import { writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { Command } from 'commander';
import { acquireClient, type Client, closeClient, settleTopology } from '../../engine/connecting/connection.js';
import { parseDuration } from '../../engine/shared/duration.js';
import { invalid } from '../../engine/shared/errors.js';
import { ensureLibrary } from '../../engine/connecting/library.js';
import { QueueSampler, QueueSet, type RatedReading } from '../../engine/operating/queue-set.js';
import { action, type CommandContext, describeError, warnUnknownQueue } from '../context.js';
import { colour, outputWidth, print, printJson, printLines } from '../output.js';
import {
  ENTER_SCREEN,
  frameBytes,
  LEAVE_SCREEN,
  type QueueRow,
  recordRates,
  renderScreen,
  renderTable,
  type ScreenSize,
  type TopHistory,
  type TopSnapshot,
} from '../top-screen.js';

interface TopFlags {
  interval: string;
}

/** Queues are looked for again this often (a SCAN of the keyspace is not a per-second job). */
const DISCOVER_EVERY_MS = 10_000;

export function register(program: Command): void {
  program
    .command('top [queues...]')
    .alias('dash')
    .description('live view of every queue: counts, rates with sparklines, oldest waiting job, workers')
    .option('--interval <duration>', 'time between refreshes, at least 1s', '1s')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq top                  every queue under the prefix, until q or Ctrl-C
  $ glidemq dash emails reports  only these queues
  $ glidemq top --interval 5s
  $ glidemq top | cat            one table, then exit (stdout not a terminal)
  $ glidemq top --json           one snapshot as JSON

Rates (done/s, fail/s) are attempts per second between two refreshes, from the queue's metrics;
a one-shot table or --json waits one interval to measure them. "oldest" is how long the oldest
waiting job has waited. Keys: q or Ctrl-C quits.`,
    )
    .action(
      action(async (ctx, named: string[], flags: TopFlags) => {
        const intervalMs = parseDuration(flags.interval, '--interval');
        if (intervalMs < 1000) throw invalid(`--interval must be at least 1s, got "${flags.interval}"`);
        const acquired = acquireClient(ctx.connection);
        try {
          const client = await settleTopology(acquired); // a plain URL naming a cluster node scans every primary
          await ensureLibrary(client);
          const sampler = new Sampler(client, ctx.prefix, named, intervalMs);
          const unknown = await sampler.unknownNamed();
          const live = !!process.stdout.isTTY && !ctx.json;
          if (!live) unknown.forEach((name) => warnUnknownQueue(ctx, name));
          const code = live ? await runLive(ctx, sampler, intervalMs) : await runOnce(ctx, sampler, intervalMs);
          if (live) unknown.forEach((name) => warnUnknownQueue(ctx, name)); // said on the normal screen, where it stays
          await sampler.close();
          return code;
        } finally {
          await closeClient(acquired.client);
        }
      }),
    );
}

/** The row top-screen.ts draws, from the engine's reading of a queue. */
function rowOf(r: RatedReading): QueueRow {
  return {
    name: r.name,
    waiting: r.counts.waiting + r.counts.paused,
    active: r.counts.active,
    delayed: r.counts.delayed,
    prioritized: r.counts.prioritized,
    completed: r.counts.completed,
    failed: r.counts.failed,
    paused: r.counts.isPaused,
    oldestWaitingMs: r.oldestWaitingMs,
    workers: r.workers,
    completedPerSec: r.completedPerSec,
    failedPerSec: r.failedPerSec,
  };
}

/** The queues' rows, read through the engine's sampler (one shared connection). */
class Sampler {
  private readonly sampler: QueueSampler;

  constructor(client: Client, prefix: string, named: string[], intervalMs: number) {
    this.sampler = new QueueSampler(new QueueSet(client, prefix, named, DISCOVER_EVERY_MS), intervalMs);
  }

  /** The named queues that were never used (most often a typo). */
  unknownNamed(): Promise<string[]> {
    return this.sampler.set.missing();
  }

  async sample(): Promise<QueueRow[]> {
    return (await this.sampler.sample()).map(rowOf);
  }

  /** The connection gave up reconnecting: no later refresh can succeed. */
  get ended(): boolean {
    return this.sampler.set.ended;
  }

  close(): Promise<void> {
    return this.sampler.set.close();
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)).unref());

function snapshotOf(ctx: CommandContext, intervalMs: number, queues: QueueRow[], problem?: string): TopSnapshot {
  return { where: ctx.where, prefix: ctx.prefix, at: Date.now(), intervalMs, queues, ...(problem ? { problem } : {}) };
}

/** Not a terminal, or --json: two samples one interval apart (for the rates), printed once. */
async function runOnce(ctx: CommandContext, sampler: Sampler, intervalMs: number): Promise<number> {
  await sampler.sample();
  await sleep(intervalMs);
  const snapshot = snapshotOf(ctx, intervalMs, await sampler.sample());
  if (ctx.json) {
    printJson(snapshot);
  } else if (snapshot.queues.length === 0) {
    print(colour.dim(`no queues under prefix "${ctx.prefix}" at ${ctx.where}`));
  } else {
    printLines(renderTable(snapshot, outputWidth()));
  }
  return 0;
}

const QUIT_KEYS = new Set([0x71 /* q */, 0x51 /* Q */, 0x03 /* Ctrl-C in raw mode */]);
const QUIT_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * The live view: draws on the alternate screen until a quit key or signal. Every way out (q,
 * Ctrl-C, a signal, an error, process.exit) leaves the terminal as it was: normal screen, cursor
 * shown, keys echoed again.
 */
async function runLive(ctx: CommandContext, sampler: Sampler, intervalMs: number): Promise<number> {
  const out = process.stdout;
  const input = process.stdin;
  const size = (): ScreenSize => ({ width: out.columns || 80, height: out.rows || 24 });

  let stopping = false;
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  const quit = () => {
    stopping = true;
    stop();
  };
  const onKey = (data: Buffer) => {
    if (data.some((b) => QUIT_KEYS.has(b))) quit();
  };

  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    // Synchronous: on process.exit there is no later tick for a queued write.
    writeSync(out.fd, LEAVE_SCREEN);
    if (input.isTTY) input.setRawMode(false);
  };

  const history: TopHistory = new Map();
  let last: TopSnapshot | undefined;
  const draw = (full = false) => {
    const s = size();
    const lines = last ? renderScreen(last, history, s) : [`glidemq top · reading ${ctx.where} …`];
    out.write((full ? '\u001b[2J' : '') + frameBytes(lines, s));
  };
  const onResize = () => draw(true);

  process.on('exit', restore);
  for (const sig of QUIT_SIGNALS) process.on(sig, quit);
  out.write(ENTER_SCREEN);
  if (input.isTTY) input.setRawMode(true); // keys one by one, unechoed; Ctrl-C arrives as a key
  input.on('data', onKey);
  input.resume();
  out.on('resize', onResize);
  try {
    draw();
    let lastDraw = -Infinity;
    let rows: QueueRow[] = [];
    while (!stopping) {
      await Promise.race([sleep(lastDraw + intervalMs - performance.now()), stopped]);
      if (stopping) break;
      let problem: string | undefined;
      try {
        const sampled = await Promise.race([sampler.sample(), stopped.then(() => undefined)]);
        if (!sampled) break;
        rows = sampled;
        recordRates(history, rows);
      } catch (err) {
        if (sampler.ended) throw err; // out of the live view, said on one line by action()
        problem = describeError(err, ctx.where);
      }
      last = snapshotOf(ctx, intervalMs, rows, problem);
      draw();
      lastDraw = performance.now();
    }
  } finally {
    out.off('resize', onResize);
    input.off('data', onKey);
    input.pause();
    for (const sig of QUIT_SIGNALS) process.off(sig, quit);
    restore();
    process.off('exit', restore);
  }
  return 0;
}
