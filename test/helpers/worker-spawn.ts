/** Starts worker-process.ts children and follows what they report (the parent side of crash tests). */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { WorkerProcessConfig } from './worker-process.js';
import { fixturePath } from './fixtures.js';
import { waitFor } from './valkey.js';

const ENTRY = fileURLToPath(new URL('./worker-process.js', import.meta.url));

/**
 * Worker processes a test file starts: push each into the returned list; after each test they
 * are killed (SIGKILL), before the test's other cleanup.
 */
export function killedAfterEach(): WorkerProcess[] {
  const procs: WorkerProcess[] = [];
  afterEach(async () => {
    await Promise.all(procs.splice(0).map((p) => p.kill()));
  });
  return procs;
}

/** Path of a processor in fixtures/processors/. */
export function processorPath(file: string): string {
  return fixturePath('processors', file);
}

export class WorkerProcess {
  readonly proc: ChildProcess;
  /** Ids of the jobs this process started, in order (a job may appear twice if it came back). */
  readonly started: string[] = [];
  readonly completed: string[] = [];
  ready = false;
  stderr = '';
  readonly exited: Promise<number | null>;

  constructor(cfg: WorkerProcessConfig) {
    this.proc = spawn(process.execPath, [ENTRY], {
      env: { ...process.env, GLIDEMQ_TEST_WORKER: JSON.stringify(cfg) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    createInterface({ input: this.proc.stdout! }).on('line', (line) => this.onLine(line));
    this.proc.stderr!.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString();
    });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code) => resolve(code)));
  }

  private onLine(line: string): void {
    let msg: { event: string; id?: string };
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (msg.event === 'ready') this.ready = true;
    else if (msg.event === 'active' && msg.id) this.started.push(msg.id);
    else if (msg.event === 'completed' && msg.id) this.completed.push(msg.id);
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async waitReady(): Promise<void> {
    await waitFor(() => this.ready || !this.alive, 'worker process to start');
    if (!this.ready) throw new Error(`worker process exited during start: ${this.stderr}`);
  }

  /** SIGKILL: the process gets no chance to finish or hand anything back. */
  async kill(): Promise<void> {
    if (this.alive) this.proc.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM: graceful close. */
  async stop(): Promise<void> {
    if (this.alive) this.proc.kill('SIGTERM');
    await this.exited;
  }
}

/** Starts a worker process and waits until it runs. */
export async function startWorkerProcess(cfg: WorkerProcessConfig): Promise<WorkerProcess> {
  const w = new WorkerProcess(cfg);
  await w.waitReady();
  return w;
}
