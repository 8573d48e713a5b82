/** Runs the real `bin/glidemq` in a child process and collects its exit code and output. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './fixtures.js';

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  input?: string | Buffer;
  timeoutMs?: number;
}

export const GLIDEMQ_BIN = join(REPO_ROOT, 'bin', 'glidemq');

/**
 * The CLI under test reads no connection profile of whoever runs the tests (their "default" could
 * change the prefix or the server): a profile file that does not exist, no profile, no prefix.
 */
export const NO_PROFILE = { GLIDEMQ_CONFIG: join(REPO_ROOT, 'no-such-glidemq-config.json'), GLIDEMQ_PROFILE: undefined, GLIDEMQ_PREFIX: undefined };

export function runCli(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  const timeoutMs = opts.timeoutMs ?? 20000;
  const running = startCli(args, opts, opts.input ?? '');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      running.kill('SIGKILL');
      reject(new Error(`glidemq ${args.join(' ')} did not exit within ${timeoutMs} ms\n${running.stdout()}\n${running.stderr()}`));
    }, timeoutMs);
  });
  return Promise.race([running.exited, late]).finally(() => clearTimeout(timer));
}

/** A long-running CLI (events --follow, exporter, ...): read its output as it comes, signal it, await its exit. */
export interface RunningCli {
  readonly pid: number;
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Sends `signal` (default SIGTERM) and resolves with the exit (SIGKILL after timeoutMs). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<CliResult>;
  /** Resolves with the exit whenever it comes. */
  readonly exited: Promise<CliResult>;
  /** Sends `signal` to the process if it still runs. */
  kill(signal: NodeJS.Signals): void;
}

/** Starts the CLI; `input` is written to its stdin, which is then closed. */
export function startCli(args: string[], opts: Omit<CliOptions, 'input' | 'timeoutMs'> = {}, input: string | Buffer = ''): RunningCli {
  // COLUMNS: help is wrapped to $COLUMNS off a terminal; a test names it when it cares
  const env = { ...process.env, GLIDEMQ_URL: undefined, GLIDEMQ_PASSWORD: undefined, ...NO_PROFILE, NO_COLOR: '1', COLUMNS: undefined, ...opts.env };
  const child = spawn(process.execPath, [GLIDEMQ_BIN, ...args], { cwd: opts.cwd ?? REPO_ROOT, env, stdio: 'pipe' });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  child.stdin.on('error', () => undefined); // a CLI that exits before reading its input
  child.stdin.end(input);
  const exited = new Promise<CliResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  const kill = (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  return {
    pid: child.pid ?? -1,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    kill,
    async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 10000) {
      kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
