/**
 * A sandboxed processor's options (BullMQ's useWorkerThreads, workerForkOptions and
 * workerThreadsOptions, and glidemq's `sandbox`), checked, with the processor file they run.
 */
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ForkOptions } from 'node:child_process';
import type { WorkerOptions as ThreadOptions } from 'node:worker_threads';
import { invalid } from '../shared/errors.js';
import { nonNegative, positive } from '../shared/numbers.js';

export interface SandboxOptions {
  /**
   * Heap limit of each child, in MB: `--max-old-space-size` for a process, the thread's
   * `resourceLimits.maxOldGenerationSizeMb` for a thread. A child that passes it ends, and its job
   * fails as out of memory. Default: Node's own limit.
   */
  maxMemoryMb?: number;
  /** A child that ran no job for this long ends (ms); a job that needs one later starts another. Default: children live until close(). */
  idleMs?: number;
  /**
   * How long a run whose signal aborted (cancelJob, a lost claim, a timeout) may take to settle
   * before its child is killed and replaced, and the job fails with the abort's reason (ms, default 2000).
   */
  abortGraceMs?: number;
}

/** What a sandboxed Worker takes beside the other worker options (worker-options.ts). */
export interface SandboxWorkerOptions {
  /** Runs a processor file in worker threads instead of child processes (BullMQ's option). */
  useWorkerThreads?: boolean;
  /** Passed on to child_process.fork for each child process (BullMQ's option). */
  workerForkOptions?: ForkOptions;
  /** Passed on to new worker_threads.Worker for each thread (BullMQ's option). */
  workerThreadsOptions?: ThreadOptions;
  sandbox?: SandboxOptions;
}

export interface SandboxSettings {
  kind: 'process' | 'thread';
  /** The processor module: its path, and its file URL (what the child imports). */
  path: string;
  url: string;
  /** Children at most: the worker's concurrency. */
  size: number;
  maxMemoryMb: number | undefined;
  idleMs: number | undefined;
  abortGraceMs: number;
  forkOptions: ForkOptions | undefined;
  threadOptions: ThreadOptions | undefined;
}

export const DEFAULT_ABORT_GRACE_MS = 2000;

/** A processor given as a file: a path or a file URL (`new Worker(name, file)`, BullMQ's sandboxed form). */
export function isProcessorFile(processor: unknown): processor is string | URL {
  return typeof processor === 'string' || processor instanceof URL;
}

export function resolveSandbox(file: string | URL, o: SandboxWorkerOptions, size: number): SandboxSettings {
  const path = processorPath(file);
  const s = o.sandbox ?? {};
  if (typeof s !== 'object' || s === null) throw invalid(`sandbox must be an object { maxMemoryMb, idleMs, abortGraceMs }, got ${String(s)}`);
  return {
    kind: o.useWorkerThreads ? 'thread' : 'process',
    path,
    url: pathToFileURL(path).href,
    size,
    maxMemoryMb: s.maxMemoryMb === undefined ? undefined : positive(s.maxMemoryMb, 'sandbox.maxMemoryMb'),
    idleMs: s.idleMs === undefined ? undefined : positive(s.idleMs, 'sandbox.idleMs'),
    abortGraceMs: nonNegative(s.abortGraceMs ?? DEFAULT_ABORT_GRACE_MS, 'sandbox.abortGraceMs'),
    forkOptions: o.workerForkOptions,
    threadOptions: o.workerThreadsOptions,
  };
}

/** The processor file's absolute path; it must exist (as BullMQ checks at construction). */
function processorPath(file: string | URL): string {
  let path: string;
  if (file instanceof URL || file.startsWith('file:')) {
    if (new URL(file).protocol !== 'file:') throw invalid(`a processor URL must be a file: URL, got ${String(file)}`);
    path = fileURLToPath(file);
  } else path = resolve(process.cwd(), file);
  if (!existsSync(path) || !statSync(path).isFile()) throw invalid(`processor file ${path} does not exist`);
  return path;
}
