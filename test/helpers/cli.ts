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

export function runCli(args: string[], opts: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    // COLUMNS: help is wrapped to $COLUMNS off a terminal; a test names it when it cares
    const env = { ...process.env, GLIDEMQ_URL: undefined, GLIDEMQ_PASSWORD: undefined, NO_COLOR: '1', COLUMNS: undefined, ...opts.env };
    const child = spawn(process.execPath, [GLIDEMQ_BIN, ...args], { cwd: opts.cwd ?? REPO_ROOT, env, stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`glidemq ${args.join(' ')} did not exit within ${opts.timeoutMs ?? 20000} ms\n${stdout}\n${stderr}`));
    }, opts.timeoutMs ?? 20000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}
