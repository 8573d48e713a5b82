/**
 * The entry of a sandbox child: a process a Worker's sandbox pool forks, or one of its worker
 * threads (sandbox-pool.ts). It loads the processor module once (its default export, or
 * module.exports), says whether that worked, then runs one job at a time as the parent sends them:
 * `run` in, `done` out, and in between a request to the parent for each job call the processor
 * makes (sandbox-job.ts). An `abort` from the parent aborts the signal of the run in progress.
 */
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, workerData, Worker as Thread } from 'node:worker_threads';
import { DIES_WITH_PARENT, errorFromWire, errorToWire, type SandboxCall, type ToChild, type ToParent, type WireError } from './sandbox-protocol.js';
import { sandboxedJob } from './sandbox-job.js';
import { takesSignal } from './processor-signal.js';

/** How often the watchdog looks for the parent (ms): an orphan ends within about this long. */
const PARENT_CHECK_MS = 300;

type UserProcessor = (job: unknown, token: string | undefined, signal: AbortSignal) => unknown;

/** The way to the parent: a worker thread's port, or the forked process's IPC channel. */
const port = !isMainThread && parentPort ? parentPort : undefined;
// a thread's messages are JSON text, as a process's are (sandbox-channel.ts)
const send: (msg: ToParent) => void = port ? (msg) => port.postMessage(JSON.stringify(msg)) : (msg) => void process.send!(msg);
/** The processor module's file URL: the thread's workerData, the process's first argument. */
const moduleUrl: string = port ? (workerData as { file: string }).file : process.argv[2];

/** The processor, or why it cannot run. */
const loaded: Promise<UserProcessor> = loadModule(moduleUrl);
let loadError: WireError | undefined;
/** The processor once loaded: a run starts on it at once. */
let processor: UserProcessor | undefined;
/** Whether it may read the signal: only then is one made for each run (processor-signal.ts). */
let withSignal = false;
loaded.then(
  (fn) => {
    processor = fn;
    withSignal = takesSignal(fn);
    send({ t: 'ready' });
  },
  (err) => {
    loadError = errorToWire(err);
    send({ t: 'load', e: loadError });
  },
);

async function loadModule(url: string): Promise<UserProcessor> {
  const path = url.startsWith('file:') ? fileURLToPath(url) : url;
  let mod: unknown;
  try {
    mod = await import(url);
  } catch (err) {
    throw new Error(`${path} cannot be loaded: ${String(err instanceof Error ? err.message : err).split('\n')[0]}`);
  }
  let fn = (mod as { default?: unknown }).default ?? mod;
  // CommonJS compiled from ESM sometimes nests the function one level deeper
  if (typeof fn === 'object' && fn !== null && typeof (fn as { default?: unknown }).default === 'function') fn = (fn as { default: unknown }).default;
  if (typeof fn !== 'function') throw new Error(`${path} exports no function: export default async (job) => result, or module.exports = async (job) => result`);
  return fn as UserProcessor;
}

/** The run in progress: its number and abort, and its calls to the parent waiting for their answers. */
let current = 0;
let abort: AbortController | undefined;
let nextCall = 0;
const calls = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();

/** A job call of run `r` (one the processor makes after its run ended is refused by the parent). */
function callParent(r: number, op: SandboxCall, args: unknown[]): Promise<unknown> {
  const n = ++nextCall;
  return new Promise((resolve, reject) => {
    calls.set(n, { resolve, reject });
    send({ t: 'call', n, r, op, args });
  });
}

/** Runs a job: on the processor at once when it is loaded, else once it is (or answers `load`). */
function run(msg: Extract<ToChild, { t: 'run' }>): void {
  current = msg.r;
  if (processor) return start(msg, processor, withSignal ? new AbortController() : undefined);
  // an abort that comes while the module loads reaches the run's signal all the same
  const early = (abort = new AbortController());
  loaded.then(
    (fn) => start(msg, fn, early),
    () => {
      abort = undefined;
      send({ t: 'load', e: loadError! });
    },
  );
}

function start(msg: Extract<ToChild, { t: 'run' }>, fn: UserProcessor, controller: AbortController | undefined): void {
  abort = controller;
  let work: Promise<unknown>;
  try {
    const job = sandboxedJob(msg.job, (op, args) => callParent(msg.r, op, args));
    work = Promise.resolve(fn(job, msg.job.token, controller?.signal as AbortSignal));
  } catch (err) {
    work = Promise.reject(err);
  }
  work.then(
    (v) => done({ t: 'done', v }),
    (err) => done({ t: 'done', e: errorToWire(err) }),
  );
}

function done(reply: Extract<ToParent, { t: 'done' }>): void {
  abort = undefined;
  try {
    send(reply);
  } catch (err) {
    // a result JSON cannot carry (a BigInt, a cycle)
    send({ t: 'done', e: { name: 'UnrecoverableError', message: `the processor returned a value that cannot be stored as JSON: ${(err as Error).message}`, unrecoverable: true } });
  }
}

function receive(msg: ToChild): void {
  if (msg.t === 'run') run(msg);
  else if (msg.t === 'abort') {
    if (msg.r === current) abort?.abort(new Error(msg.reason));
  }
  else if (msg.t === 'reply') {
    const waiting = calls.get(msg.n);
    if (!waiting) return;
    calls.delete(msg.n);
    if (msg.e) waiting.reject(errorFromWire(msg.e));
    else waiting.resolve(msg.v);
  }
}

if (port) port.on('message', (msg: string) => receive(JSON.parse(msg) as ToChild));
else {
  process.on('message', (msg) => receive(msg as ToChild));
  // the parent is gone (it died, or closed without ending this child): nothing is left to serve
  process.on('disconnect', () => process.exit(0));
  // the kernel kills this process as its parent ends (a parent that died before the kernel was
  // told is seen here), or it watches for that itself
  if (process.argv[3] !== DIES_WITH_PARENT) watchParent();
  else if (process.ppid !== Number(process.argv[4])) process.exit(0);
  // Ctrl-C reaches the whole process group, and a service manager's SIGTERM often every process of
  // the service: the parent decides when its children end (its graceful stop lets running jobs
  // finish, then ends them), so these do not end a child on their own
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => undefined);
}

/**
 * A forked child ends on its own soon after its parent dies, even while a processor blocks its main
 * thread (a CPU loop never lets 'disconnect' run; a SIGKILLed parent runs no exit handler to kill
 * it; Linux's parent-death signal is out of Node's own reach, and is used only where setpriv can
 * set it, sandbox-channel.ts): a small thread, which runs whatever the
 * main thread does, looks every PARENT_CHECK_MS whether this process was given to another parent
 * (its parent died), and then kills this process. One timer in one thread per child, started once
 * per child, not per job; unref'd, so it never keeps the child alive by itself. SIGKILL, as the
 * parent kills its children: the main thread may never turn again, and this child ignores SIGTERM.
 */
function watchParent(): void {
  const watchdog = `
    const { workerData } = require('node:worker_threads');
    setInterval(() => {
      if (process.ppid !== workerData.parent) process.kill(process.pid, 'SIGKILL');
    }, workerData.every);`;
  try {
    const thread = new Thread(watchdog, { eval: true, workerData: { parent: process.ppid, every: PARENT_CHECK_MS }, resourceLimits: { maxOldGenerationSizeMb: 8 } });
    thread.unref();
    // a watchdog that could not start leaves the child as it was before: 'disconnect' still ends an idle one
    thread.on('error', () => undefined);
  } catch {
    // as above
  }
}
