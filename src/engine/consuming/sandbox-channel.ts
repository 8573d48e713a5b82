/**
 * One sandbox child behind one small interface, whatever it is: a forked process (the default) or
 * a worker thread (useWorkerThreads). It carries messages, and says once, in words, how the child
 * ended: "exited with code 3", "was killed by SIGKILL", "ran out of memory (heap limit 64 MB)".
 */
import { fork, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker as Thread } from 'node:worker_threads';
import type { SandboxSettings } from './sandbox-options.js';
import { DIES_WITH_PARENT, type ToChild, type ToParent } from './sandbox-protocol.js';

/**
 * The child's entry, found from this module: dist/src/engine/consuming/sandbox-child.js, also from
 * the CLI's bundle (dist/src/cli/bundle.cjs, whose import.meta.url is the bundle's own).
 */
const CHILD_ENTRY = new URL(import.meta.url.endsWith('.cjs') ? '../engine/consuming/sandbox-child.js' : './sandbox-child.js', import.meta.url);

export interface ChannelEvents {
  message(msg: ToParent): void;
  /** The child ended (after kill() too); `why` completes "the sandbox process 123 ..." */
  ended(why: string): void;
}

export interface SandboxChannel {
  /** "process 1234" or "thread 5": names the child in a failure's reason. */
  readonly label: string;
  /** The process id (a thread's is this process's). */
  readonly pid: number;
  send(msg: ToChild): void;
  kill(): void;
}

export function openChannel(s: SandboxSettings, events: ChannelEvents): SandboxChannel {
  return s.kind === 'thread' ? openThread(s, events) : openProcess(s, events);
}

/** What the stderr of an out-of-memory V8 says (it aborts, so the exit alone says SIGABRT). */
const OUT_OF_MEMORY = /heap out of memory|Reached heap limit/;

function outOfMemory(s: SandboxSettings): string {
  return `ran out of memory (heap limit ${s.maxMemoryMb === undefined ? "Node's default" : `${s.maxMemoryMb} MB`})`;
}

/** The flags of this process a child takes too, less those that would run something else or clash. */
function inheritedFlags(s: SandboxSettings): string[] {
  const out: string[] = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-e' || a === '--eval' || a === '-p' || a === '--print') i++;
    else if (/^--(inspect|debug)/.test(a) || a.startsWith('--input-type') || (s.maxMemoryMb !== undefined && a.startsWith('--max-old-space-size'))) continue;
    else out.push(a);
  }
  if (s.maxMemoryMb !== undefined) out.push(`--max-old-space-size=${s.maxMemoryMb}`);
  return out;
}

/**
 * setpriv (util-linux), where there is one that takes --pdeathsig: a child forked through it is
 * SIGKILLed by the kernel as soon as this process ends, however it ends (SIGKILL included), even
 * while the child's main thread is blocked. Such a child needs no watchdog thread of its own
 * (sandbox-child.ts), whose presence costs a child about a fifth of its CPU per job, and tens of
 * ms to start. Looked for once per process; null where there is none (the child watches itself).
 */
let deathSignalWrapper: string | null | undefined;

function parentDeathWrapper(): string | null {
  if (deathSignalWrapper !== undefined) return deathSignalWrapper;
  deathSignalWrapper = null;
  if (process.platform !== 'linux') return null;
  for (const path of ['/usr/bin/setpriv', '/bin/setpriv']) {
    if (!existsSync(path)) continue;
    const check = spawnSync(path, ['--pdeathsig', 'KILL', process.execPath, '--version'], { stdio: 'ignore', timeout: 5000 });
    if (check.status === 0) return (deathSignalWrapper = path);
  }
  return null;
}

/**
 * How a child process is started: through parentDeathWrapper's setpriv when there is one and the
 * fork options choose no program or flags of their own, else as a plain fork.
 */
function forkCommand(s: SandboxSettings): { args: string[]; execPath?: string; execArgv: string[] } {
  const flags = inheritedFlags(s);
  const own = s.forkOptions !== undefined && (Object.hasOwn(s.forkOptions, 'execPath') || Object.hasOwn(s.forkOptions, 'execArgv'));
  const wrapper = own ? null : parentDeathWrapper();
  if (!wrapper) return { args: [s.url], execArgv: flags };
  return { args: [s.url, DIES_WITH_PARENT, String(process.pid)], execPath: wrapper, execArgv: ['--pdeathsig', 'KILL', process.execPath, ...flags] };
}

function openProcess(s: SandboxSettings, events: ChannelEvents): SandboxChannel {
  const { args, ...command } = forkCommand(s);
  const child = fork(fileURLToPath(CHILD_ENTRY), args, {
    ...command,
    // stderr passes through this process, which keeps its end to tell an out-of-memory death
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    serialization: 'json',
    ...s.forkOptions,
  });
  let tail = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    process.stderr.write(chunk);
    tail = (tail + chunk.toString()).slice(-4096);
  });
  child.on('message', (msg) => events.message(msg as ToParent));
  // 'close': after the exit and the end of stderr, so the tail is whole
  child.once('close', (code, signal) => {
    if (OUT_OF_MEMORY.test(tail)) events.ended(outOfMemory(s));
    else events.ended(signal ? `was killed by ${signal}` : `exited with code ${code}`);
  });
  // a child that cannot start ends too: its 'close' follows
  child.on('error', () => undefined);
  const pid = child.pid ?? 0;
  return {
    label: `process ${pid}`,
    pid,
    send(msg) {
      if (child.connected) child.send(msg);
    },
    kill() {
      child.kill('SIGKILL');
    },
  };
}

function openThread(s: SandboxSettings, events: ChannelEvents): SandboxChannel {
  const limits = s.maxMemoryMb === undefined ? {} : { resourceLimits: { ...s.threadOptions?.resourceLimits, maxOldGenerationSizeMb: s.maxMemoryMb } };
  const thread = new Thread(CHILD_ENTRY, { ...s.threadOptions, ...limits, workerData: { file: s.url } });
  let failure: Error | undefined;
  // JSON text both ways: a string crosses as one copy, where a structured clone walks the job's
  // objects at several times the cost (and JSON is what a process's channel carries too)
  thread.on('message', (msg: string) => events.message(JSON.parse(msg) as ToParent));
  thread.on('error', (err) => (failure = err));
  thread.once('exit', (code) => {
    if ((failure as NodeJS.ErrnoException | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY') events.ended(outOfMemory(s));
    else if (failure) events.ended(`crashed: ${failure.message}`);
    else events.ended(`exited with code ${code}`);
  });
  return {
    label: `thread ${thread.threadId}`,
    pid: process.pid,
    send(msg) {
      thread.postMessage(JSON.stringify(msg));
    },
    kill() {
      void thread.terminate();
    },
  };
}
