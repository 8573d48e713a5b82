/**
 * Starts real valkey-server processes for tests: a free loopback port, a private temporary
 * directory, persistence only where asked, and a stop that ends exactly the process it started.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';

export const SERVER_BIN = binary('valkey-server', 'redis-server');
export const CLI_BIN = binary('valkey-cli', 'redis-cli');

function binary(preferred: string, fallback: string): string {
  const found = spawnSync('sh', ['-c', `command -v ${preferred}`]).status === 0;
  return found ? preferred : fallback;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface ServerOptions {
  /** 'none' (default: fastest), 'aof-everysec', 'aof-always', 'rdb'. */
  persistence?: 'none' | 'aof-everysec' | 'aof-always' | 'rdb';
  /** Extra config lines appended to the generated config file. */
  config?: string[];
  /** A config file to include (from fixtures/valkey). */
  include?: string;
  /** Reuse this data directory (restart tests). */
  dir?: string;
  port?: number;
  /** requirepass for the server; the harness's own clients authenticate with it. */
  password?: string;
  /** Extra environment for the server process (e.g. LD_PRELOAD: see power-loss.ts). */
  env?: Record<string, string>;
}

export class TestServer {
  proc: ChildProcess | undefined;
  port = 0;
  dir = '';
  private ownsDir = false;
  private confPath = '';

  constructor(private readonly opts: ServerOptions = {}) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  async start(): Promise<this> {
    if (!this.dir) {
      this.dir = this.opts.dir ?? mkdtempSync(join(tmpdir(), 'glidemq-test-'));
      this.ownsDir = !this.opts.dir;
    }
    if (!this.port) this.port = this.opts.port ?? (await freePort());
    const lines = [
      `port ${this.port}`,
      'bind 127.0.0.1',
      `dir ${this.dir}`,
      'daemonize no',
      'loglevel warning',
      `logfile ${join(this.dir, 'server.log')}`,
      // A later line wins, so an included fixture comes after the basics and is not overridden
      // by default persistence lines (only by an explicit `persistence` or `config`).
      ...(this.opts.include ? [`include ${resolve(this.opts.include)}`] : []),
      ...(this.opts.include && !this.opts.persistence ? [] : persistenceLines(this.opts.persistence ?? 'none')),
      ...(this.opts.password ? [`requirepass ${this.opts.password}`] : []),
      ...(this.opts.config ?? []),
    ];
    this.confPath = join(this.dir, 'test.conf');
    writeFileSync(this.confPath, lines.join('\n') + '\n');
    this.proc = spawn(SERVER_BIN, [this.confPath], { stdio: 'ignore', env: { ...process.env, ...this.opts.env } });
    const proc = this.proc;
    proc.on('exit', () => {
      if (this.proc === proc) this.proc = undefined;
    });
    try {
      await this.waitForPing();
    } catch (err) {
      await this.signalAndWait('SIGKILL'); // a server that never became usable is not left behind
      throw err;
    }
    return this;
  }

  client(): Redis {
    return new Redis({ host: '127.0.0.1', port: this.port, password: this.opts.password, maxRetriesPerRequest: 3, lazyConnect: false });
  }

  private async waitForPing(deadlineMs = 15000): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    let lastErr: unknown;
    while (Date.now() < deadline) {
      if (!this.proc) throw new Error(`valkey-server on port ${this.port} exited during start (see ${this.dir}/server.log)`);
      const c = new Redis({
        host: '127.0.0.1',
        port: this.port,
        password: this.opts.password,
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      c.on('error', () => undefined);
      try {
        await c.connect();
        // A server still loading its AOF answers LOADING; wait until it serves commands.
        await c.ping();
        c.disconnect();
        return;
      } catch (err) {
        lastErr = err;
        c.disconnect();
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`valkey-server on port ${this.port} did not answer PING: ${String(lastErr)}`);
  }

  /** SIGKILL: no shutdown save, no AOF flush beyond what fsync policy already did. */
  async kill(): Promise<void> {
    await this.signalAndWait('SIGKILL');
  }

  async restart(): Promise<void> {
    await this.kill();
    await this.start();
  }

  async stop(): Promise<void> {
    await this.signalAndWait('SIGKILL');
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }

  private async signalAndWait(sig: NodeJS.Signals): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill(sig);
    });
    this.proc = undefined;
  }
}

function persistenceLines(mode: NonNullable<ServerOptions['persistence']>): string[] {
  switch (mode) {
    case 'none':
      return ['save ""', 'appendonly no'];
    case 'rdb':
      return ['save 3600 1', 'appendonly no'];
    case 'aof-everysec':
      return ['save ""', 'appendonly yes', 'appendfsync everysec', 'aof-use-rdb-preamble yes'];
    case 'aof-always':
      return ['save ""', 'appendonly yes', 'appendfsync always', 'aof-use-rdb-preamble yes'];
  }
}

/** Starts a server before the suite and stops it after; returns a getter for the running server. */
export function useServer(opts: ServerOptions = {}): () => TestServer {
  let server: TestServer | undefined;
  before(async function () {
    this.timeout(30000);
    server = await new TestServer(opts).start();
  });
  after(async () => {
    await server?.stop();
  });
  return () => {
    if (!server) throw new Error('server not started');
    return server;
  };
}

/** Polls `check` until it returns a truthy value or the deadline passes (a safety net, not a speed check). */
export async function waitFor<T>(check: () => Promise<T> | T, what: string, timeoutMs = 15000, everyMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
