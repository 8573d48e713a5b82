/**
 * The load run's child processes: producers (producer-process.ts) and real `glidemq worker --json`
 * CLI workers. Each parses its child's stdout line by line into the shared Tally.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { GLIDEMQ_BIN } from '../helpers/cli.js';
import { processorPath } from '../helpers/worker-spawn.js';
import type { ProducerProcessConfig } from './producer-process.js';
import type { Tally } from './tally.js';

const PRODUCER_ENTRY = fileURLToPath(new URL('./producer-process.js', import.meta.url));

export class Child {
  stderr = '';
  readonly exited: Promise<number | null>;
  private buf = '';

  constructor(
    readonly what: string,
    readonly proc: ChildProcess,
    onLine: (msg: Record<string, unknown>) => void,
  ) {
    proc.stdout!.on('data', (chunk: Buffer) => {
      this.buf += chunk.toString();
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        try {
          onLine(JSON.parse(line) as Record<string, unknown>);
        } catch {
          /* not a JSON line */
        }
      }
    });
    proc.stderr!.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString();
    });
    this.exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** SIGTERM (graceful: a producer writes its last bulk, a worker finishes and closes); returns the exit code. */
  async stop(): Promise<number | null> {
    if (this.alive) this.proc.kill('SIGTERM');
    return this.exited;
  }

  /** For cleanup after a failure only. */
  async kill(): Promise<void> {
    if (this.alive) this.proc.kill('SIGKILL');
    await this.exited;
  }
}

export class ProducerChild extends Child {
  ready = false;
  done = false;

  constructor(cfg: ProducerProcessConfig, tally: Tally) {
    const proc = spawn(process.execPath, [PRODUCER_ENTRY], {
      env: { ...process.env, GLIDEMQ_LOAD_PRODUCER: JSON.stringify(cfg) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    super(`producer ${cfg.settings.label}`, proc, (msg) => {
      if (msg.event === 'ready') this.ready = true;
      else if (msg.event === 'done') this.done = true;
      else if (msg.event === 'added') tally.added(cfg.queue, msg as never);
    });
  }
}

/** `glidemq worker fixtures/processors/load.mjs --queue <q> -c <n> --json`: one line per finished attempt. */
export class CliWorkerChild extends Child {
  constructor(url: string, queue: string, concurrency: number, tally: Tally) {
    const args = [GLIDEMQ_BIN, '--url', url, '--json', 'worker', processorPath('load.mjs'), '--queue', queue, '-c', String(concurrency)];
    const proc = spawn(process.execPath, args, { env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    super(`cli worker on ${queue}`, proc, (msg) => {
      if (msg.status === 'completed') tally.outcome(queue, String(msg.id), 'completed');
      else if (msg.status === 'failed' && msg.willRetry === false) tally.outcome(queue, String(msg.id), 'failed');
    });
  }
}
