/**
 * Starts a real Valkey cluster for tests: three primaries and three replicas on free loopback
 * ports, each node in its own temporary directory, created with `valkey-cli --cluster create`.
 * Nodes can be SIGKILLed and restarted one at a time; stop() ends exactly the processes started here.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { CLI_BIN, freePort, TestServer, waitFor, type ServerOptions } from './valkey.js';

export interface ClusterOptions {
  /** Primaries (default 3); each gets one replica. */
  primaries?: number;
  /** How long a node may be silent before it is marked failed (ms, default 1000). */
  nodeTimeout?: number;
  persistence?: ServerOptions['persistence'];
  /** Extra config lines for every node. */
  config?: string[];
}

export interface NodeInfo {
  id: string;
  port: number;
  role: 'master' | 'replica';
  /** The primary's node id, for a replica. */
  masterId?: string;
  flags: string[];
  /** Slot ranges a primary serves, inclusive. */
  slots: [number, number][];
}

export class TestCluster {
  readonly nodes: TestServer[] = [];
  private root = '';

  constructor(private readonly opts: ClusterOptions = {}) {}

  get seedPort(): number {
    return this.nodes[0].port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.seedPort}`;
  }

  /** ioredis cluster startup nodes. */
  get startupNodes(): { host: string; port: number }[] {
    return this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  }

  node(port: number): TestServer {
    const n = this.nodes.find((s) => s.port === port);
    if (!n) throw new Error(`no cluster node on port ${port}`);
    return n;
  }

  async start(): Promise<this> {
    const count = (this.opts.primaries ?? 3) * 2;
    this.root = mkdtempSync(join(tmpdir(), 'glidemq-cluster-'));
    const timeout = this.opts.nodeTimeout ?? 1000;
    const ports: number[] = [];
    // Bus ports are chosen too (cluster-port), so a node port near 65535 never overflows port+10000.
    while (ports.length < count * 2) {
      const p = await freePort();
      if (!ports.includes(p)) ports.push(p);
    }
    for (let i = 0; i < count; i++) {
      const dir = mkdtempSync(join(this.root, `node-${i}-`));
      this.nodes.push(
        new TestServer({
          dir,
          port: ports[i],
          persistence: this.opts.persistence ?? 'none',
          config: [
            'cluster-enabled yes',
            `cluster-port ${ports[count + i]}`,
            `cluster-config-file ${join(dir, 'nodes.conf')}`,
            `cluster-node-timeout ${timeout}`,
            // A replica may be promoted however long its link was down (tests kill primaries at will).
            'cluster-replica-validity-factor 0',
            // Replicas sync at once instead of waiting for more replicas to share a diskless transfer.
            'repl-diskless-sync-delay 0',
            ...(this.opts.config ?? []),
          ],
        }),
      );
    }
    try {
      await Promise.all(this.nodes.map((n) => n.start()));
      await this.create();
      await this.waitHealthy();
    } catch (err) {
      await this.stop();
      throw err;
    }
    return this;
  }

  private async create(): Promise<void> {
    const args = ['--cluster', 'create', ...this.nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'];
    const { code, out } = await run(CLI_BIN, args);
    if (code !== 0) throw new Error(`${CLI_BIN} --cluster create failed (${code}):\n${out}`);
  }

  /** A plain connection to one node (no redirection); callers disconnect it. */
  direct(port: number): Redis {
    const c = new Redis({ host: '127.0.0.1', port, lazyConnect: false, maxRetriesPerRequest: 1, retryStrategy: () => null });
    c.on('error', () => undefined);
    return c;
  }

  /** Runs one command on one node and disconnects. */
  async call(port: number, ...args: (string | number)[]): Promise<unknown> {
    const c = this.direct(port);
    try {
      return await c.call(String(args[0]), ...args.slice(1).map(String));
    } finally {
      c.disconnect();
    }
  }

  /** The topology as one running node sees it (CLUSTER NODES). */
  async topology(viaPort?: number): Promise<NodeInfo[]> {
    const port = viaPort ?? this.running()[0].port;
    return parseNodes(String(await this.call(port, 'CLUSTER', 'NODES')));
  }

  running(): TestServer[] {
    return this.nodes.filter((n) => n.proc !== undefined);
  }

  async primaries(): Promise<NodeInfo[]> {
    return (await this.topology()).filter((n) => n.role === 'master' && n.slots.length > 0 && !n.flags.includes('fail'));
  }

  /** The port of the primary that serves a slot. */
  async primaryForSlot(slot: number): Promise<number> {
    const owner = (await this.primaries()).find((p) => p.slots.some(([a, b]) => slot >= a && slot <= b));
    if (!owner) throw new Error(`no primary serves slot ${slot}`);
    return owner.port;
  }

  async replicaOf(primaryPort: number): Promise<number | undefined> {
    const nodes = await this.topology();
    const primary = nodes.find((n) => n.port === primaryPort);
    return nodes.find((n) => n.role === 'replica' && n.masterId === primary?.id && !n.flags.includes('fail'))?.port;
  }

  /**
   * Every running node says cluster_state:ok with all 16384 slots served, and every replica's link
   * to its primary is up (so a failover finds a synced replica).
   */
  async waitHealthy(timeoutMs = 30000): Promise<void> {
    await waitFor(
      async () => {
        for (const n of this.running()) {
          const info = String(await this.call(n.port, 'CLUSTER', 'INFO'));
          if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info)) return false;
          const repl = String(await this.call(n.port, 'INFO', 'replication'));
          if (/role:slave/.test(repl) && !/master_link_status:up/.test(repl)) return false;
        }
        // Every node agrees on who the primaries are (gossip has settled), and none still flags a
        // running node as failed (a restarted node is flagged until the others hear from it).
        const views = await Promise.all(this.running().map((n) => this.topology(n.port)));
        const up = new Set(this.running().map((n) => n.port));
        if (views.some((v) => v.some((x) => up.has(x.port) && x.flags.some((f) => f.startsWith('fail'))))) return false;
        // A restarted old primary first comes back as a primary without slots, then turns replica.
        if (views.some((v) => v.some((x) => up.has(x.port) && (x.role === 'replica' ? !x.masterId : x.slots.length === 0)))) return false;
        const sig = (v: NodeInfo[]) =>
          v.filter((x) => x.role === 'master' && x.slots.length > 0).map((x) => x.port).sort().join(',');
        return views.every((v) => sig(v) === sig(views[0]));
      },
      'the cluster to be healthy',
      timeoutMs,
      50,
    );
  }

  /** SIGKILL one node (no shutdown save). */
  async kill(port: number): Promise<void> {
    await this.node(port).kill();
  }

  /** Starts a killed node again with the same directory, port and cluster identity. */
  async restart(port: number): Promise<void> {
    const n = this.node(port);
    if (n.proc) await n.kill();
    await n.start();
  }

  /** Waits until the replica that was `replicaPort` serves slots as a primary, seen by every running node. */
  async waitPromoted(replicaPort: number, timeoutMs = 30000): Promise<void> {
    await waitFor(
      async () => {
        for (const n of this.running()) {
          const me = (await this.topology(n.port)).find((x) => x.port === replicaPort);
          if (!me || me.role !== 'master' || me.slots.length === 0) return false;
        }
        return true;
      },
      `the replica on port ${replicaPort} to be promoted`,
      timeoutMs,
      50,
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
    if (this.root) rmSync(this.root, { recursive: true, force: true });
  }
}

/** Parses CLUSTER NODES: `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`. */
export function parseNodes(text: string): NodeInfo[] {
  const out: NodeInfo[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(' ');
    if (f.length < 8) continue;
    const port = Number(f[1].split('@')[0].split(':').pop());
    const flags = f[2].split(',');
    const slots: [number, number][] = [];
    for (const s of f.slice(8)) {
      if (s.startsWith('[')) continue; // a slot being migrated
      const [a, b] = s.split('-').map(Number);
      slots.push([a, b ?? a]);
    }
    out.push({
      id: f[0],
      port,
      role: flags.includes('master') ? 'master' : 'replica',
      masterId: f[3] === '-' ? undefined : f[3],
      flags,
      slots,
    });
  }
  return out;
}

function run(bin: string, args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('exit', (code) => resolve({ code: code ?? 1, out }));
  });
}

/** Starts a cluster before the suite and stops it after; returns a getter for it. */
export function useCluster(opts: ClusterOptions = {}): () => TestCluster {
  let cluster: TestCluster | undefined;
  before(async function () {
    this.timeout(60000);
    cluster = await new TestCluster(opts).start();
  });
  after(async function () {
    this.timeout(30000);
    await cluster?.stop();
  });
  return () => {
    if (!cluster) throw new Error('cluster not started');
    return cluster;
  };
}
