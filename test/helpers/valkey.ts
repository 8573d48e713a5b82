/**
 * Starts real valkey-server processes for tests: a free loopback port, a private temporary
 * directory, persistence only where asked, and a stop that ends exactly the process it started.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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

/**
 * A port nothing listens on, for a test server (or for "nothing answers here").
 *
 * Chosen BELOW the kernel's ephemeral range (ip_local_port_range), never from it: a port from that
 * range can be taken, while its server is down for a restart, as the local port of any outgoing
 * connection, including a client's retry to that very port (a TCP self-connect on loopback); the
 * server then cannot bind it again ("exited during start"). Below the range only another listener
 * can take it. A port is handed out once per process, so a client some test left retrying never
 * reaches a later test's server.
 */
export async function freePort(): Promise<number> {
  const [low, high] = TEST_PORT_RANGE;
  if (high - low < 1000) return kernelPort();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
  return kernelPort();
}

/** Ports freePort gave this process: never given twice. */
const handedOut = new Set<number>();

/** [low, high] below the ephemeral range (Linux; elsewhere the kernel's own choice is used). */
const TEST_PORT_RANGE: [number, number] = (() => {
  try {
    const [ephemeralLow] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return [Math.max(10000, ephemeralLow - 15000), ephemeralLow - 1];
  } catch {
    return [0, 0];
  }
})();

async function kernelPort(): Promise<number> {
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

/** Whether a listener could bind 127.0.0.1:port now (as valkey-server does, with SO_REUSEADDR). */
export function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
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
  private readonly clients = new Set<Redis>();
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
    const portChosenHere = !this.port && this.opts.port === undefined;
    if (!this.port) this.port = this.opts.port ?? (await freePort());
    // A port another listener took between the choice (or the kill) and the bind: a fresh server
    // moves to another port, a restarted one (same port, its identity) waits for it to be free.
    for (let attempt = 1; ; attempt++) {
      const logSize = fileSize(join(this.dir, 'server.log'));
      try {
        await this.spawnAndWait();
        return this;
      } catch (err) {
        const log = textFrom(join(this.dir, 'server.log'), logSize);
        if (attempt >= 5 || !/Address already in use/.test(log)) throw err;
        if (portChosenHere) this.port = await freePort();
        else await waitFor(() => canListen(this.port), `port ${this.port} to be free again`, 10000, 100).catch(() => undefined);
      }
    }
  }

  private async spawnAndWait(): Promise<void> {
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
  }

  /** A client for the test's own commands (the test closes it; after stop() it reconnects quietly). */
  client(): Redis {
    const c = new Redis({ host: '127.0.0.1', port: this.port, password: this.opts.password, maxRetriesPerRequest: 3, lazyConnect: false });
    this.clients.add(c);
    c.once('end', () => this.clients.delete(c));
    return c;
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
        connectTimeout: 2000,
        commandTimeout: 2000, // a listener that is not a server never answers
      });
      c.on('error', () => undefined);
      try {
        await c.connect();
        // A server still loading its AOF answers LOADING; wait until it serves commands.
        await c.ping();
        // The answer must come from the process started here, not from another server that holds
        // the port this one failed to bind.
        const pid = /process_id:(\d+)/.exec(await c.info('server').catch(() => ''))?.[1];
        c.disconnect();
        if (pid === undefined || Number(pid) === this.proc?.pid) return;
        throw new Error(`another server (pid ${pid}) answers on port ${this.port}`);
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
    // A describe's own `after` that closes these clients (often with quit(), which must still
    // answer) runs after useServer's: mocha runs `after` hooks in the order they were added. So a
    // client of a server stopped on purpose is quieted (no `[ioredis] Unhandled error event:
    // ECONNREFUSED`), stops reconnecting (a client some test forgets would otherwise knock on its
    // port for the rest of the process, where a later test counts the connections it sees), and
    // answers a later quit() as done.
    for (const c of this.clients) retire(c);
    this.clients.clear();
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

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** What a log file gained after `offset` bytes ('' if there is none). */
function textFrom(path: string, offset: number): string {
  try {
    return readFileSync(path).subarray(offset).toString('utf8');
  } catch {
    return '';
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

/** A handed-out client of a stopped server: quiet, no more reconnects, quit() answered as done. */
function retire(c: Redis): void {
  c.on('error', () => undefined);
  c.options.retryStrategy = () => null;
  const quit = c.quit.bind(c);
  c.quit = ((...args: Parameters<Redis['quit']>) => (c.status === 'end' ? Promise.resolve('OK' as const) : quit(...args))) as Redis['quit'];
}
