/**
 * The operator's commands over many queues (glidemq only: BullMQ has no command line): wall time
 * of one `glidemq <command>` process, spawn to exit, the way a user or a cron job runs it.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { Queue } from '../../src/index.js';
import { median, sentCommands } from './measure.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = fileURLToPath(new URL('../../../bin/glidemq', import.meta.url));
/** `top --json` samples twice this far apart (its shortest interval) before it prints. */
export const TOP_INTERVAL_MS = 1000;

/** Creates `queues` queues of `jobs` waiting jobs each, over one shared connection, 50 at a time. */
export async function makeQueues(url: string, queues: number, jobs: number): Promise<void> {
  const client = new Redis(url);
  sentCommands.exclude(client);
  try {
    const one = async (i: number) => {
      const q = new Queue(`scale-${String(i).padStart(4, '0')}`, { connection: client });
      await q.addBulk(Array.from({ length: jobs }, (_, j) => ({ name: 'scale', data: { j } })));
      await q.close();
    };
    for (let i = 0; i < queues; i += 50) await Promise.all(Array.from({ length: Math.min(50, queues - i) }, (_, k) => one(i + k)));
  } finally {
    client.disconnect();
  }
}

/** Wall ms of `glidemq ...args`; exit codes other than `okCodes` throw with stderr's first line. */
function timed(url: string, args: string[], okCodes: number[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, GLIDEMQ_URL: url }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const ms = performance.now() - t0;
      if (code !== null && okCodes.includes(code)) resolve(ms);
      else reject(new Error(`glidemq ${args.join(' ')} exited with ${code}: ${stderr.trim().split('\n')[0]}`));
    });
  });
}

export interface CliTimes {
  list: number;
  heal: number;
  audit: number;
  /** top --json minus the interval it waits between its two samples. */
  top: number;
}

/** Median over `runs` of each command's wall time against the server at `url`. */
export async function cliTimes(url: string, runs: number): Promise<CliTimes> {
  const med = async (args: string[], okCodes = [0], minus = 0) => {
    const times: number[] = [];
    for (let i = 0; i < runs; i++) times.push((await timed(url, args, okCodes)) - minus);
    return median(times);
  };
  return {
    list: await med(['queues']),
    // --check exits 1 when it finds drift, which is an answer, not a failure
    heal: await med(['heal', '--all', '--check'], [0, 1]),
    // audit exits 1 when a durability check fails: this bench server runs without persistence
    audit: await med(['audit'], [0, 1]),
    top: await med(['top', '--json', '--interval', '1s'], [0], TOP_INTERVAL_MS),
  };
}
