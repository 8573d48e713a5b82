/**
 * What `glidemq worker` does around any worker (queue or broadcast): one line per finished job on
 * stdout, --max-jobs and --fail-fast stop it, SIGINT/SIGTERM close it gracefully and a second signal
 * exits at once; --exit-when-idle polls an idleness check and closes the worker when it holds true;
 * the command returns its exit code once the worker has closed.
 *
 * On stderr the worker speaks (worker-voice.ts, --log-json for services): a start line, the stop a
 * signal asked for, a connection lost and restored, a queue paused and resumed, a request from
 * afar (`glidemq workers --quiet|--stop`: the Worker obeys it, this says so), what keeps an
 * --exit-when-idle worker waiting (delayed jobs), and why it exited.
 */
import type { EventEmitter } from 'node:events';
import { lastConnectionProblem } from '../engine/connecting/connection.js';
import { LIBRARY_PACKAGE_VERSION } from '../engine/connecting/library.js';
import { describeError } from './context.js';
import { colour, errorWidth, formatDuration, formatRelative, hangingWrap, plural, print, printJsonLine } from './output.js';
import { workerVoice, type Voice } from './worker-voice.js';

interface Closable extends EventEmitter {
  close(): Promise<void>;
  readonly activeCount: number;
}

interface Runnable extends Closable {
  /** A Worker's resolves once it has closed (then waitUntilReady() says it started); a BroadcastWorker's once it works. */
  run(): Promise<void>;
  waitUntilReady?(): Promise<void>;
  /**
   * Stops taking jobs at once (Worker.pause(true)): claims that arrive or wait unstarted go back to
   * the queue, no attempt and no stall counted. A worker without it just closes.
   */
  pause?(doNotWaitActive: boolean): Promise<void>;
}

export interface RunLimits {
  maxJobs?: number;
  exitWhenIdle: boolean;
  failFast: boolean;
}

/** How one finished job (or message) is shown: `<id> <label>`, and the JSON fields that follow `id`. */
export interface Finished {
  id: string;
  label: string;
  fields: Record<string, unknown>;
  /** Attempts made, this one included. */
  attemptsMade: number;
  failedReason?: string | null;
  /** How long this run took (ms). */
  durationMs: number;
  /** After a failure: whether it runs again. */
  willRetry?: boolean;
}

/** What --exit-when-idle's check found. */
export interface IdleState {
  /** Nothing is left to run: the worker may exit. */
  idle: boolean;
  /** Not idle only because of delayed jobs: how many, and the ms until the first is due. */
  delayed?: { count: number; nextDueInMs?: number };
}

/** What the worker works on, for what it says about itself. */
export interface WorkerAbout {
  /** `queue emails`, `subscription audit of broadcast orders`. */
  label: string;
  /** The queue's name, when it is a queue (the hint on a paused queue names it). */
  queue?: string;
  /** Fields of the start record (--log-json): queue, or broadcast and subscription. */
  fields: Record<string, unknown>;
  /** The server's URL, the password hidden. */
  server: string;
  concurrency: number;
  /** What it runs, for counts: `job` (default) or `message`. */
  unit?: string;
}

export interface RunSpec<T> {
  json: boolean;
  /** Lifecycle lines on stderr as JSON records (--log-json). */
  logJson: boolean;
  about: WorkerAbout;
  limits: RunLimits;
  /** What the 'completed'/'failed' event's item shows (`err` only on 'failed'), read after the event. */
  describe(item: T, err?: Error): Finished;
  /** Opened only with --exit-when-idle, after the worker has started: the check, and what closes it. */
  idleCheck(): { check: () => Promise<IdleState>; release: () => Promise<void> };
}

/** Why the worker stopped; the first reason given is the one told. */
type StopReason =
  | { kind: 'signal'; signal: string }
  | { kind: 'idle' }
  | { kind: 'max-jobs'; max: number }
  | { kind: 'fail-fast'; id: string; label: string }
  | { kind: 'remote' };

/** After this long without the worker starting (no server yet), say that it is still connecting. */
const CONNECTING_NOTICE_MS = 3000;

/** Runs the worker until something stops it; resolves to the exit code (1 only for --fail-fast with a job failed for good). */
export async function runUntilStopped<T>(worker: Runnable, spec: RunSpec<T>): Promise<number> {
  const { limits, about } = spec;
  const voice = workerVoice(spec.logJson);
  const tally = { completed: 0, failed: 0, retrying: 0 };
  const startedAt = performance.now();
  const life = manageLifecycle(worker, voice);
  const counted = () => {
    const finished = tally.completed + tally.failed + tally.retrying;
    if (limits.maxJobs !== undefined && finished >= limits.maxJobs) void life.stop({ kind: 'max-jobs', max: limits.maxJobs });
  };
  worker.on('completed', (item: T) => {
    report(spec.json, spec.describe(item), 'completed');
    tally.completed++;
    counted();
  });
  worker.on('failed', (item: T, err: Error) => {
    const f = spec.describe(item, err);
    report(spec.json, f, 'failed');
    if (f.willRetry) {
      tally.retrying++;
      counted();
      return;
    }
    tally.failed++;
    if (limits.failFast && !life.stopping) {
      // Pause first, in this very event: the claims the failed job's finish brought in are
      // dispatched right after it, and must be kept and handed back, not started.
      void worker.pause?.(true).catch(() => undefined);
      const running = worker.activeCount;
      voice.say(
        'warn',
        'stopping',
        `stopping (--fail-fast): ${f.id} ${f.label} failed for good${f.failedReason ? `: ${f.failedReason}` : ''}; ` +
          `no more jobs are taken${running > 0 ? `, ${plural(running, 'running job')} may finish` : ''}`,
        { reason: 'fail-fast', id: f.id, failedReason: f.failedReason ?? null, running },
      );
      void life.stop({ kind: 'fail-fast', id: f.id, label: f.label });
    }
    counted();
  });
  let connectionDown = false;
  worker.on('error', (err: Error) => {
    // while the server is away every call fails the same way: the lost line said it already
    if (!connectionDown) voice.say('error', 'error', `worker: ${err.message}`, { error: err.message });
  });
  worker.on('connectionLost', (why: string) => {
    connectionDown = true;
    voice.say('warn', 'connection-lost', `lost the connection to ${about.server} (${why}); reconnecting, running jobs go on`, {
      server: about.server,
      error: why,
    });
  });
  worker.on('connectionRestored', (downMs: number) => {
    connectionDown = false;
    voice.say('info', 'connection-restored', `connection to ${about.server} restored after ${formatDuration(downMs)}`, { server: about.server, downMs });
  });
  const queue = about.queue ?? '';
  worker.on('queuePaused', () => {
    voice.say('warn', 'queue-paused', `queue ${queue} is paused: no job is taken until it is resumed (glidemq resume ${queue})`, { queue });
  });
  worker.on('queueResumed', () => {
    voice.say('info', 'queue-resumed', `queue ${queue} resumed: taking jobs again`, { queue });
  });

  heedRequests(worker, life, voice);

  const announce = once(() => sayStarted(voice, about));
  worker.once('ready', announce); // Worker: as soon as it works, before whatever its first fetch finds
  const slow = setTimeout(() => {
    const why = lastConnectionProblem();
    voice.say('warn', 'connecting', `still connecting to ${about.server}${why ? ` (${why})` : ''}; retrying`, { server: about.server, ...(why ? { error: why } : {}) });
  }, CONNECTING_NOTICE_MS);
  const closed = whenClosed(worker);
  const run = worker.run();
  let started: boolean;
  try {
    // a signal while it still connects closes it: then run() may never settle
    started = await Promise.race([(worker.waitUntilReady?.() ?? run).then(() => true), closed.then(() => false)]);
  } catch (err) {
    // the command's own error line follows (exit 2); a log collector gets the record
    if (spec.logJson) voice.say('error', 'exit', describeError(err, about.server), { reason: 'error', code: 2 });
    throw err;
  } finally {
    clearTimeout(slow);
  }
  if (started) announce();
  else run.catch(() => undefined);
  if (started && limits.exitWhenIdle) {
    const { check, release } = spec.idleCheck();
    exitWhenIdle(worker, life, check, release, voice, about);
  }
  await closed;
  const code = limits.failFast && tally.failed > 0 ? 1 : 0;
  sayExited(voice, life.reason, code, about, tally, performance.now() - startedAt);
  return code;
}

function sayStarted(voice: Voice, about: WorkerAbout): void {
  const started = `worker started: ${about.label} on ${about.server}, concurrency ${about.concurrency}, glidemq ${LIBRARY_PACKAGE_VERSION}, pid ${process.pid}`;
  voice.say(
    'info',
    'start',
    // the terminal's width (a log record is one line whatever its length)
    voice.json ? started : hangingWrap(started, errorWidth()),
    { ...about.fields, server: about.server, concurrency: about.concurrency, version: LIBRARY_PACKAGE_VERSION, pid: process.pid },
  );
}

function sayExited(voice: Voice, reason: StopReason | undefined, code: number, about: WorkerAbout, tally: { completed: number; failed: number; retrying: number }, uptimeMs: number): void {
  const why = (() => {
    switch (reason?.kind) {
      case 'signal':
        return `on ${reason.signal}`;
      case 'idle':
        return `nothing left to do in ${about.label} (--exit-when-idle)`;
      case 'max-jobs':
        return `--max-jobs ${reason.max} reached`;
      case 'fail-fast':
        return `${reason.id} ${reason.label} failed for good (--fail-fast)`;
      case 'remote':
        return 'asked to stop (glidemq workers --stop)';
      default:
        return 'the worker closed';
    }
  })();
  const done = [`${tally.completed} completed`, `${tally.failed} failed`, ...(tally.retrying ? [`${tally.retrying} failed and retried`] : [])];
  const total = tally.completed + tally.failed + tally.retrying;
  voice.say(
    code === 0 ? 'info' : 'warn',
    'exit',
    `exited${code === 0 ? '' : ` with code ${code}`}: ${why}; ${plural(total, about.unit ?? 'job')} finished (${done.join(', ')}) in ${formatDuration(uptimeMs)}`,
    {
      reason: reason?.kind ?? 'closed',
      ...(reason?.kind === 'signal' ? { signal: reason.signal } : {}),
      ...(reason?.kind === 'fail-fast' ? { id: reason.id } : {}),
      code,
      ...tally,
      uptimeMs: Math.round(uptimeMs),
    },
  );
}

/**
 * Requests from afar (the Worker obeys them itself: worker-remote.ts): says what was asked, and a
 * stop closes the command as a signal does, so it exits 0 once the running jobs finished.
 */
function heedRequests(worker: Closable, life: Lifecycle, voice: Voice): void {
  worker.on('quietRequested', () => {
    const running = worker.activeCount;
    voice.say('warn', 'quiet-requested', `asked to go quiet (glidemq workers --quiet): no new job is taken${running > 0 ? `; ${plural(running, 'running job')} may finish` : ''}`, { running });
  });
  worker.on('stopRequested', () => {
    const running = worker.activeCount;
    voice.say('info', 'stop-requested', `asked to stop (glidemq workers --stop): ${running > 0 ? `waiting for ${plural(running, 'running job')}, then exiting` : 'no job running, exiting'}`, { reason: 'remote', running });
    void life.stop({ kind: 'remote' });
  });
}

function report(json: boolean, f: Finished, status: 'completed' | 'failed'): void {
  const { durationMs } = f;
  const willRetry = f.willRetry ?? false;
  if (json) {
    printJsonLine({ id: f.id, ...f.fields, status, durationMs, attemptsMade: f.attemptsMade, ...(status === 'failed' ? { failedReason: f.failedReason, willRetry } : {}) });
  } else if (status === 'completed') {
    print(`${colour.green('✓')} ${f.id} ${f.label} ${colour.dim(`${durationMs} ms`)}`);
  } else {
    print(`${colour.red('✗')} ${f.id} ${f.label} ${colour.dim(`${durationMs} ms`)} ${f.failedReason ?? ''}${willRetry ? colour.dim(' (will retry)') : ''}`);
  }
}

interface Lifecycle {
  /** Starts a graceful close (once); the first reason given is the one kept. */
  stop(reason: StopReason): Promise<void>;
  /** True once a close has started. */
  readonly stopping: boolean;
  readonly reason: StopReason | undefined;
}

function manageLifecycle(worker: Closable, voice: Voice): Lifecycle {
  let closing: Promise<void> | undefined;
  let why: StopReason | undefined;
  const life: Lifecycle = {
    stop: (reason) => {
      why ??= reason;
      return (closing ??= worker.close());
    },
    get stopping() {
      return closing !== undefined;
    },
    get reason() {
      return why;
    },
  };
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    const running = worker.activeCount;
    if (signals > 1) {
      voice.say(
        'warn',
        'stop-now',
        `stopping now (second ${signal})${running > 0 ? `: ${plural(running, 'running job')} left unfinished, stalled recovery runs ${running === 1 ? 'it' : 'them'} again` : ''}`,
        { signal, running, code: 130 },
      );
      process.exit(130);
    }
    voice.say(
      'info',
      'stopping',
      `stopping: ${running > 0 ? `waiting for ${plural(running, 'running job')}` : 'no job running'} (${signal}; a second signal stops at once)`,
      { reason: 'signal', signal, running },
    );
    void life.stop({ kind: 'signal', signal });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return life;
}

/** How often --exit-when-idle says again what it waits for when nothing changed. */
const WAITING_REPEAT_MS = 60_000;

/**
 * Closes the worker once it runs nothing and `check` says so; `release` runs when the worker has
 * closed (to close the connection the check used). Delayed jobs keep it waiting: it says so once,
 * again when their number changes, and once a minute.
 */
function exitWhenIdle(worker: Closable, life: Lifecycle, check: () => Promise<IdleState>, release: () => Promise<void>, voice: Voice, about: WorkerAbout): void {
  let timer: NodeJS.Timeout | undefined;
  let told: { count: number; at: number } | undefined;
  const tick = async () => {
    if (life.stopping) return;
    const state = worker.activeCount === 0 ? await check().catch(() => undefined) : undefined;
    if (life.stopping) return;
    if (state?.idle && worker.activeCount === 0) {
      void life.stop({ kind: 'idle' });
      return;
    }
    const delayed = state?.delayed;
    if (delayed && worker.activeCount === 0 && (told?.count !== delayed.count || performance.now() - told.at >= WAITING_REPEAT_MS)) {
      told = { count: delayed.count, at: performance.now() };
      const due = delayed.nextDueInMs === undefined ? '' : `, next due ${formatRelative(delayed.nextDueInMs)}`;
      voice.say('info', 'waiting', `waiting: ${plural(delayed.count, 'delayed job')} in ${about.label}${due} (--exit-when-idle exits once they have run)`, {
        delayed: delayed.count,
        ...(delayed.nextDueInMs === undefined ? {} : { nextDueInMs: delayed.nextDueInMs }),
      });
    }
    timer = setTimeout(() => void tick(), 200);
  };
  timer = setTimeout(() => void tick(), 100);
  worker.once('closed', () => {
    clearTimeout(timer);
    void release();
  });
}

function whenClosed(worker: EventEmitter): Promise<void> {
  return new Promise((resolve) => worker.once('closed', () => resolve()));
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
