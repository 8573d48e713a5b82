/**
 * Figures that run the command line as a user does: a new process per invocation, wall time from
 * spawn to exit. BullMQ has no command line; its side of the one-job figure is the smallest script
 * that adds one job with BullMQ and exits.
 */
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { median } from './measure.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = fileURLToPath(new URL('../../../bin/glidemq', import.meta.url));

/** True when `glidemq enqueue` exists with --ndjson (it is built by another issue). */
export function enqueueAvailable(): boolean {
  const r = spawnSync(process.execPath, [BIN, 'enqueue', '--help'], { encoding: 'utf8', timeout: 10_000 });
  return r.status === 0 && /--ndjson/.test(r.stdout);
}

interface RunResult {
  ms: number;
  code: number | null;
  stderr: string;
}

function timed(args: string[], env: NodeJS.ProcessEnv, stdin?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ ms: performance.now() - t0, code, stderr }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin ?? '');
  });
}

function check(what: string, r: RunResult): RunResult {
  if (r.code !== 0) throw new Error(`${what} exited with ${r.code}: ${r.stderr.trim().split('\n')[0]}`);
  return r;
}

/** Jobs/s of `glidemq enqueue <q> --ndjson` over `lines` lines, process start to exit. */
export async function ndjsonEnqueue(url: string, lines: number): Promise<number> {
  const input: string[] = [];
  for (let i = 0; i < lines; i++) input.push(`{"i":${i}}`);
  const r = check('glidemq enqueue --ndjson', await timed([BIN, 'enqueue', 'bench', '--ndjson'], { GLIDEMQ_URL: url }, input.join('\n') + '\n'));
  return (lines * 1000) / r.ms;
}

/** Median wall time (ms) of one `glidemq enqueue <q> <data>` invocation. */
export async function glidemqOneEnqueue(url: string, runs: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(check('glidemq enqueue', await timed([BIN, 'enqueue', 'bench', '{"a":1}'], { GLIDEMQ_URL: url })).ms);
  return median(times);
}

/**
 * Median wall time (ms) of a bare `node -e 0` in the same environment: the part of the one-job
 * figures that is Node's own start. It varies a lot between machines: with NODE_EXTRA_CA_CERTS set,
 * Node reads and parses that certificate file at every start, before any JavaScript runs.
 */
export async function nodeStartMs(runs: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(check('node -e 0', await timed(['-e', '0'], {})).ms);
  return median(times);
}

/** Median wall time (ms) of a one-shot script that adds one job with BullMQ. */
export async function bullmqOneEnqueue(url: string, runs: number): Promise<number> {
  const u = new URL(url);
  const script =
    `import { Queue } from 'bullmq';` +
    `const q = new Queue('bench', { connection: { host: '${u.hostname}', port: ${Number(u.port)} } });` +
    `const job = await q.add('default', { a: 1 }); process.stdout.write(job.id + '\\n'); await q.close();`;
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(check('bullmq one-job script', await timed(['--input-type=module', '-e', script], {})).ms);
  return median(times);
}
