/**
 * The parent side of the clock-skew test: starts test/fixtures/skew-worker.ts in a child process
 * whose clock the skew-clock preload shifts, sends it commands, and reads the runs it traced.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import type { JobOptions } from '../../src/index.js';

const AGENT = fileURLToPath(new URL('../fixtures/skew-worker.js', import.meta.url));
const SKEW_CLOCK = new URL('../fixtures/skew-clock.js', import.meta.url).href;

/** What a job asks the agents' processor to do. */
export interface TaskData {
  /** Run this long (ms) before finishing: longer than the lock, so only heartbeats keep the claim. */
  hold?: number;
  /** A step job: runs these steps in order, parking `parkMs` (server time) between them. */
  steps?: string[];
  step?: string;
  parkMs?: number;
  /** Throw on the first attempt, so the job's backoff decides when the second runs. */
  failFirst?: boolean;
  /** Never finish when run by the agent with this label (it is SIGKILLed holding the job). */
  hangOn?: string;
}

/** One line of a queue's trace list. */
export interface TraceEntry {
  kind: 'run' | 'park';
  id: string;
  step?: string;
  /** Attempts made before this run. */
  attempt: number;
  /** The label of the agent that ran it. */
  by: string;
  /** Server time (ms) the run started, or the park was asked for. */
  at: number;
  /** park: the server time the next step was parked until. */
  until?: number;
}

export interface WorkSettings {
  concurrency: number;
  lockDuration: number;
  stalledInterval: number;
  promotionInterval: number;
}

export type AgentCommand =
  | ({ seq: number; cmd: 'work'; queue: string } & WorkSettings)
  | { seq: number; cmd: 'stop'; queue: string; force: boolean }
  | { seq: number; cmd: 'add'; queue: string; name: string; data: TaskData; opts: JobOptions };

/** A command as the caller writes it: the agent's sequence number is added when it is sent. */
export type AgentRequest = AgentCommand extends infer C ? (C extends unknown ? Omit<C, 'seq'> : never) : never;

export interface AgentReply {
  seq: number;
  error?: string;
  id?: string;
  at?: number;
}

export const traceKey = (queue: string): string => `skew-trace:${queue}`;

export async function serverNow(client: Redis): Promise<number> {
  const [s, us] = await client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

export async function readTrace(client: Redis, queue: string): Promise<TraceEntry[]> {
  return (await client.lrange(traceKey(queue), 0, -1)).map((l) => JSON.parse(l) as TraceEntry);
}

export class SkewAgent {
  readonly proc: ChildProcess;
  /** Its Date.now() and new Date() as it reported them once running. */
  reportedNow = 0;
  reportedDate = 0;
  stderr = '';
  private markReady: () => void = () => undefined;
  private readonly ready = new Promise<void>((resolve) => (this.markReady = resolve));
  private seq = 0;
  private readonly pending = new Map<number, { resolve: (r: AgentReply) => void; reject: (e: Error) => void }>();
  /** Queues this agent runs a Worker on (stopped by stopAll). */
  readonly working = new Set<string>();
  readonly exited: Promise<void>;

  /** skewMs 0 starts it without the preload: the correct worker. */
  constructor(
    readonly label: string,
    url: string,
    readonly skewMs: number,
  ) {
    const preload = skewMs === 0 ? [] : ['--import', SKEW_CLOCK];
    this.proc = spawn(process.execPath, [...preload, AGENT, url, label], {
      env: { ...process.env, GLIDEMQ_SKEW_MS: String(skewMs) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let buf = '';
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        this.onLine(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    });
    this.proc.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.proc.stdin!.on('error', () => undefined); // a killed agent's pipe: the pending request fails below
    this.exited = new Promise((resolve) =>
      this.proc.once('exit', () => {
        for (const p of this.pending.values()) p.reject(new Error(`agent ${this.label} exited: ${this.stderr}`));
        this.pending.clear();
        resolve();
      }),
    );
  }

  private onLine(line: string): void {
    let msg: AgentReply & { event?: string; now?: number; date?: number };
    try {
      msg = JSON.parse(line);
    } catch {
      this.stderr += `stdout: ${line}\n`; // not protocol: kept for the failure message
      return;
    }
    if (msg.event === 'ready') {
      this.markReady();
      this.reportedNow = msg.now ?? 0;
      this.reportedDate = msg.date ?? 0;
      return;
    }
    const p = this.pending.get(msg.seq);
    this.pending.delete(msg.seq);
    if (msg.error !== undefined) p?.reject(new Error(`agent ${this.label}: ${msg.error}`));
    else p?.resolve(msg);
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Resolves once it runs; rejects if it exits first or does not start within the safety net. */
  async waitReady(timeoutMs = 15_000): Promise<this> {
    let timer: NodeJS.Timeout | undefined;
    const failed = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`agent ${this.label} did not start: ${this.stderr}`)), timeoutMs);
      void this.exited.then(() => reject(new Error(`agent ${this.label} exited during start: ${this.stderr}`)));
    });
    failed.catch(() => undefined); // once it runs, a later exit (the kill) is no start failure
    try {
      await Promise.race([this.ready, failed]);
    } finally {
      clearTimeout(timer);
    }
    return this;
  }

  private request(cmd: AgentRequest): Promise<AgentReply> {
    const seq = ++this.seq;
    return new Promise((resolve, reject) => {
      if (!this.alive) return reject(new Error(`agent ${this.label} is not running: ${this.stderr}`));
      this.pending.set(seq, { resolve, reject });
      this.proc.stdin!.write(JSON.stringify({ ...cmd, seq }) + '\n');
    });
  }

  async work(queue: string, settings: WorkSettings): Promise<void> {
    await this.request({ cmd: 'work', queue, ...settings });
    this.working.add(queue);
  }

  async stop(queue: string, force = false): Promise<void> {
    this.working.delete(queue);
    await this.request({ cmd: 'stop', queue, force });
  }

  async stopAll(): Promise<void> {
    if (!this.alive) return;
    await Promise.all([...this.working].map((q) => this.stop(q, true)));
  }

  /** Adds a job with this agent's clock; `at` is the server time just before the add. */
  async add(queue: string, name: string, data: TaskData, opts: JobOptions = {}): Promise<{ id: string; at: number }> {
    const r = await this.request({ cmd: 'add', queue, name, data, opts });
    return { id: String(r.id), at: Number(r.at) };
  }

  /** SIGKILL by pid: no close, no hand-back; its claims stay behind as a crash leaves them. */
  async kill(): Promise<void> {
    if (this.alive) this.proc.kill('SIGKILL');
    await this.exited;
  }
}
