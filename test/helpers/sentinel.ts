/**
 * A real Sentinel set for tests: a primary and one replica (TestServer), and three sentinels
 * (`valkey-server <conf> --sentinel`), each on a free loopback port with its own directory and config
 * (a sentinel rewrites its config file), each stopped by the pid it was started with. Timings are
 * small so that a failover completes in a few seconds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { freePort, SERVER_BIN, TestServer, waitFor } from './valkey.js';

export interface SentinelSetOptions {
  /** requirepass of the primary and the replica (and masterauth / sentinel auth-pass to match). */
  password?: string;
  /** requirepass of the sentinels themselves. */
  sentinelPassword?: string;
  masterName?: string;
  /** How many sentinels must agree that the primary is down (default 2 of 3). */
  quorum?: number;
}

export class SentinelProcess {
  proc: ChildProcess | undefined;
  port = 0;
  readonly dir = mkdtempSync(join(tmpdir(), 'glidemq-sentinel-'));

  constructor(private readonly password?: string) {}

  async start(lines: string[]): Promise<this> {
    if (!this.port) this.port = await freePort();
    const conf = join(this.dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${this.port}`,
        'bind 127.0.0.1',
        `dir ${this.dir}`,
        'daemonize no',
        'loglevel warning',
        `logfile ${join(this.dir, 'sentinel.log')}`,
        ...(this.password ? [`requirepass ${this.password}`] : []),
        ...lines,
      ].join('\n') + '\n',
    );
    const proc = spawn(SERVER_BIN, [conf, '--sentinel'], { stdio: 'ignore' });
    this.proc = proc;
    proc.on('exit', () => {
      if (this.proc === proc) this.proc = undefined;
    });
    await waitFor(async () => {
      if (!this.proc) throw new Error(`sentinel on port ${this.port} exited during start (see ${this.dir}/sentinel.log)`);
      const c = this.client({ lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      c.on('error', () => undefined);
      try {
        await c.connect();
        return (await c.ping()) === 'PONG';
      } finally {
        c.disconnect();
      }
    }, `sentinel on port ${this.port} to answer PING`);
    return this;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  client(extra: RedisOptions = {}): Redis {
    return new Redis({ host: '127.0.0.1', port: this.port, password: this.password, maxRetriesPerRequest: 1, ...extra });
  }

  /** SIGKILL the exact process this object started. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill('SIGKILL');
    });
    this.proc = undefined;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class SentinelSet {
  readonly name: string;
  /** The first node starts as the primary, the second as its replica; a failover swaps them. */
  nodes: TestServer[] = [];
  readonly sentinels: SentinelProcess[];

  constructor(private readonly opts: SentinelSetOptions = {}) {
    this.name = opts.masterName ?? 'mymaster';
    this.sentinels = [0, 1, 2].map(() => new SentinelProcess(opts.sentinelPassword));
  }

  async start(): Promise<this> {
    const { password } = this.opts;
    const auth = password ? [`masterauth ${password}`] : [];
    const primaryPort = await freePort();
    const primary = new TestServer({ password, config: auth, port: primaryPort });
    // The replica follows from its first start (a config line), so the sentinels find it at once.
    const replica = new TestServer({ password, config: [...auth, `replicaof 127.0.0.1 ${primaryPort}`] });
    this.nodes = [primary, replica];
    await primary.start();
    await replica.start();
    await waitFor(async () => /master_link_status:up/.test(await this.info(replica, 'replication')), 'the replica to sync');
    const lines = [
      `sentinel monitor ${this.name} 127.0.0.1 ${primary.port} ${this.opts.quorum ?? 2}`,
      `sentinel down-after-milliseconds ${this.name} 1000`,
      `sentinel failover-timeout ${this.name} 4000`,
      `sentinel parallel-syncs ${this.name} 1`,
      ...(this.opts.password ? [`sentinel auth-pass ${this.name} ${this.opts.password}`] : []),
      ...(this.opts.sentinelPassword ? [`sentinel sentinel-pass ${this.opts.sentinelPassword}`] : []),
    ];
    await Promise.all(this.sentinels.map((s) => s.start(lines)));
    // Ready when every sentinel knows the replica and the two other sentinels (hello messages, ~2 s).
    await waitFor(async () => {
      for (const s of this.sentinels) {
        const m = await this.sentinelMaster(s);
        if (m['num-other-sentinels'] !== '2' || m['num-slaves'] !== '1') return false;
      }
      return true;
    }, 'the sentinels to know each other and the replica', 20000, 100);
    return this;
  }

  /** `redis+sentinel://[:password@]127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/<name>`. */
  url(o: { password?: string; name?: string; db?: number; scheme?: string } = {}): string {
    const password = 'password' in o ? o.password : this.opts.password;
    const auth = password ? `:${encodeURIComponent(password)}@` : '';
    const hosts = this.sentinels.map((s) => s.address).join(',');
    return `${o.scheme ?? 'redis+sentinel'}://${auth}${hosts}/${o.name ?? this.name}${o.db ? `/${o.db}` : ''}`;
  }

  /** SENTINEL MASTER <name> from one sentinel, as a field → value map. */
  async sentinelMaster(s: SentinelProcess): Promise<Record<string, string>> {
    const c = s.client();
    c.on('error', () => undefined);
    try {
      const flat = (await c.call('SENTINEL', 'MASTER', this.name)) as string[];
      const out: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]] = flat[i + 1];
      return out;
    } finally {
      c.disconnect();
    }
  }

  /** The primary's port as a sentinel reports it. */
  async primaryPort(s: SentinelProcess = this.sentinels[0]): Promise<number> {
    const c = s.client();
    c.on('error', () => undefined);
    try {
      const addr = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.name)) as [string, string];
      return Number(addr[1]);
    } finally {
      c.disconnect();
    }
  }

  /** The node the sentinels currently name as primary. */
  async primary(): Promise<TestServer> {
    const port = await this.primaryPort();
    return this.nodes.find((n) => n.port === port)!;
  }

  async info(node: TestServer, section: string): Promise<string> {
    const c = node.client();
    c.on('error', () => undefined);
    try {
      return String(await c.call('INFO', section));
    } finally {
      c.disconnect();
    }
  }

  /**
   * SENTINEL FAILOVER, then waits until every sentinel names the other node and that node says it
   * is the primary (about a second). Returns the new primary. The old primary is turned into a
   * replica of the new one only some seconds later (a sentinel first waits to see it report its
   * role for a while): waitForOldPrimaryToFollow() waits for that.
   */
  async failover(): Promise<TestServer> {
    const before = await this.primaryPort();
    const c = this.sentinels[0].client();
    c.on('error', () => undefined);
    try {
      // A sentinel refuses while the replica it would promote is not yet known as good; retry until taken.
      await waitFor(async () => (await c.call('SENTINEL', 'FAILOVER', this.name)) === 'OK', 'SENTINEL FAILOVER to be accepted', 15000, 200);
    } finally {
      c.disconnect();
    }
    const next = this.nodes.find((n) => n.port !== before)!;
    await waitFor(async () => {
      for (const s of this.sentinels) if ((await this.primaryPort(s)) !== next.port) return false;
      return /role:master/.test(await this.info(next, 'replication'));
    }, 'every sentinel to name the new primary', 20000, 100);
    return next;
  }

  /** Waits until the node that is not the primary replicates from it (after a failover: up to ~15 s). */
  async waitForOldPrimaryToFollow(): Promise<void> {
    const primary = await this.primary();
    const other = this.nodes.find((n) => n !== primary)!;
    await waitFor(
      async () => /role:slave[\s\S]*master_link_status:up/.test(await this.info(other, 'replication')),
      'the old primary to replicate from the new one',
      30000,
      100,
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.sentinels.map((s) => s.stop()));
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

/** Starts a Sentinel set before the suite and stops it after. */
export function useSentinelSet(opts: SentinelSetOptions = {}): () => SentinelSet {
  let set: SentinelSet | undefined;
  before(async function () {
    this.timeout(40000);
    set = new SentinelSet(opts);
    try {
      await set.start();
    } catch (err) {
      await set.stop();
      set = undefined;
      throw err;
    }
  });
  after(async function () {
    this.timeout(20000);
    await set?.stop();
  });
  return () => {
    if (!set) throw new Error('sentinel set not started');
    return set;
  };
}
