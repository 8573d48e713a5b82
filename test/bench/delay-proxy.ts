/**
 * A loopback TCP proxy that delays every chunk by a fixed time in each direction, so the benchmark
 * can show how the queues behave when the server is not on the same host (round trips cost time).
 *
 * It runs in its own process, so its work never competes with the measured client's event loop.
 * Node timers have whole-millisecond resolution; sub-millisecond delays come from a timer thread
 * that sleeps with Atomics.wait (fractional milliseconds) and wakes the proxy's loop by message.
 * Nothing spins, so the proxy costs little CPU next to the measured processes.
 *
 * The time a chunk is held is settable while it runs (`setHold`): forwarding itself and the
 * thread's wake-up take time too (about 0.1 ms per hop here), so the bench calibrates the hold
 * until a PING through the proxy takes the wanted delay longer than a direct one (net-probe.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

export interface DelayProxy {
  port: number;
  url: string;
  /** The delay each way it was started for (ms). */
  delayMs: number;
  /** Holds each chunk this long (ms) from now on; resolves once the proxy applies it. */
  setHold(ms: number): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the proxy process in front of 127.0.0.1:targetPort; resolves once it listens. */
export async function startDelayProxy(targetPort: number, delayMs: number): Promise<DelayProxy> {
  const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve', String(targetPort), String(delayMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  // The child answers each request with one line, in order.
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => waiting.shift()?.(line));
  const next = () => new Promise<string>((resolve) => waiting.push(resolve));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`delay proxy exited with code ${code} before listening`)));
    void next().then((line) => resolve(Number(/ready (\d+)/.exec(line)?.[1])));
  });
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    delayMs,
    async setHold(ms) {
      const ack = next();
      child.stdin!.write(`hold ${Math.max(0, ms).toFixed(4)}\n`);
      await ack;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

const TIMER_THREAD = `
const { workerData, parentPort } = require('node:worker_threads');
const gen = new Int32Array(workerData, 0, 1);
const due = new Float64Array(workerData, 8, 1);
const now = () => performance.timeOrigin + performance.now();
let fired = 0;
for (;;) {
  const g = Atomics.load(gen, 0);
  if (g === fired) { Atomics.wait(gen, 0, g); continue; }
  const wait = due[0] - now();
  if (wait > 0.005) { Atomics.wait(gen, 0, g, wait); continue; }
  fired = g;
  parentPort.postMessage(0);
}`;

interface Pending {
  due: number;
  to: Socket;
  data: Buffer;
}

function serve(targetPort: number, delayMs: number): void {
  let holdMs = delayMs;
  const shared = new SharedArrayBuffer(16);
  const gen = new Int32Array(shared, 0, 1);
  const due = new Float64Array(shared, 8, 1);
  const timer = new Worker(TIMER_THREAD, { eval: true, workerData: shared });
  const now = () => performance.timeOrigin + performance.now();
  // One FIFO for everything: with one fixed delay, arrival order is due order (a hold changed
  // with chunks in flight at most delays later ones until the earlier ones are due).
  const queue: Pending[] = [];
  let head = 0;
  let armed = false;

  const arm = (at: number) => {
    due[0] = at;
    Atomics.add(gen, 0, 1);
    Atomics.notify(gen, 0);
    armed = true;
  };
  timer.on('message', () => {
    armed = false;
    const t = now();
    while (head < queue.length && queue[head].due <= t + 0.005) {
      const p = queue[head++];
      if (!p.to.destroyed) p.to.write(p.data);
    }
    if (head > 1024 && head * 2 > queue.length) {
      queue.splice(0, head);
      head = 0;
    }
    if (head < queue.length) arm(queue[head].due);
  });
  const later = (to: Socket, data: Buffer) => {
    queue.push({ due: now() + holdMs, to, data });
    if (!armed) arm(queue[head].due);
  };

  const server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port: targetPort });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (d) => later(upstream, d));
    upstream.on('data', (d) => later(client, d));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    process.stdout.write(`ready ${typeof addr === 'object' && addr ? addr.port : 0}\n`);
  });
  // Requests on stdin, one line each, acknowledged in order on stdout.
  const requests = createInterface({ input: process.stdin });
  requests.on('line', (line) => {
    const m = /^hold ([\d.]+)$/.exec(line);
    if (m) holdMs = Number(m[1]);
    process.stdout.write(m ? `hold ${holdMs}\n` : `unknown request\n`);
  });
  // stdin closes when the bench exits, however it exits: the proxy never outlives it.
  requests.on('close', () => process.exit(0));
  process.on('SIGTERM', () => process.exit(0));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv[2] === 'serve') {
  serve(Number(process.argv[3]), Number(process.argv[4]));
}
