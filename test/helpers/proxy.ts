/**
 * A loopback TCP proxy in front of a test server that injects the network faults glidemq users
 * meet: added latency per direction, connections cut at once or in the middle of a chosen command
 * (the request reaches the server, its reply is lost), and a server that stops answering.
 *
 * Only for tests: it listens on 127.0.0.1 and forwards to one target port.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { RedisOptions } from 'ioredis';

export interface CutOptions {
  /**
   * true (default): the matching request is forwarded, so the server runs it, and the connection
   * is cut when its reply arrives (the reply is lost) or after `replyWaitMs` (a blocking read).
   * false: the connection is cut before the request leaves, so the server never sees it.
   */
  forward?: boolean;
  /** For forwarded requests: cut after this long even without a reply (default 100 ms). */
  replyWaitMs?: number;
}

interface Pair {
  client: Socket;
  server: Socket;
  /** Bytes from both sides are dropped (black-holed connection). */
  zombie: boolean;
  /** Set once a cut is under way: the next reply is dropped and every connection closed. */
  cutting: PendingCut | undefined;
  upDue: number;
  downDue: number;
}

interface PendingCut {
  pattern: RegExp;
  opts: Required<CutOptions>;
  resolve: () => void;
  done?: boolean;
}

export class FaultProxy {
  port = 0;
  private server: Server | undefined;
  private readonly pairs = new Set<Pair>();
  private upLatency = 0;
  private downLatency = 0;
  private blackholed = false;
  private pendingCuts: PendingCut[] = [];
  /** What the proxy has done, for test reports. */
  readonly stats = { connections: 0, cuts: 0, cutConnections: 0, blackholes: 0 };

  constructor(
    private readonly targetPort: number,
    private readonly targetHost = '127.0.0.1',
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Connections open through the proxy right now (black-holed ones included). */
  get openConnections(): number {
    return this.pairs.size;
  }

  async start(): Promise<this> {
    const srv = createServer((client) => this.accept(client));
    this.server = srv;
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(this.port, '127.0.0.1', () => resolve());
    });
    const addr = srv.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    return this;
  }

  async stop(): Promise<void> {
    this.cutAll();
    for (const c of this.pendingCuts) c.resolve();
    this.pendingCuts = [];
    const srv = this.server;
    this.server = undefined;
    if (srv) await new Promise<void>((r) => srv.close(() => r()));
  }

  /** Adds this much delay to every chunk client → server (`up`) and server → client (`down`). */
  setLatency(upMs: number, downMs = upMs): void {
    this.upLatency = Math.max(0, upMs);
    this.downLatency = Math.max(0, downMs);
  }

  /** Cuts every connection now (the client side sees a reset). Returns how many were cut. */
  cutAll(): number {
    const n = this.pairs.size;
    for (const p of [...this.pairs]) this.destroy(p);
    if (n > 0) {
      this.stats.cuts++;
      this.stats.cutConnections += n;
    }
    return n;
  }

  /**
   * Cuts every connection when the next client → server chunk matching `pattern` (a command name
   * such as `FCALL` or `XREADGROUP`, case-insensitive) passes. Resolves once the cut happened.
   */
  cutOn(pattern: string | RegExp, opts: CutOptions = {}): Promise<void> {
    const re = typeof pattern === 'string' ? new RegExp(`\\$\\d+\\r\\n${pattern}\\r\\n`, 'i') : pattern;
    return new Promise((resolve) => {
      this.pendingCuts.push({ pattern: re, opts: { forward: opts.forward ?? true, replyWaitMs: opts.replyWaitMs ?? 100 }, resolve });
    });
  }

  /** Forgets cuts that are armed but have not happened yet. */
  disarm(): void {
    for (const c of this.pendingCuts) c.resolve();
    this.pendingCuts = [];
  }

  /**
   * The server stops answering: existing and new connections stay open, but nothing passes in
   * either direction (bytes are dropped, as in a partition).
   */
  blackhole(): void {
    this.blackholed = true;
    this.stats.blackholes++;
    for (const p of this.pairs) p.zombie = true;
  }

  /**
   * Ends a black-hole. The connections that lost bytes can never be used again; by default they
   * are cut so clients notice. With `keepZombies` they stay open and silent forever, and the
   * client has to notice the dead connection by itself.
   */
  recover(opts: { keepZombies?: boolean } = {}): void {
    this.blackholed = false;
    if (!opts.keepZombies) {
      let n = 0;
      for (const p of [...this.pairs]) {
        if (p.zombie) {
          this.destroy(p);
          n++;
        }
      }
      if (n > 0) {
        this.stats.cuts++;
        this.stats.cutConnections += n;
      }
    }
  }

  private accept(client: Socket): void {
    this.stats.connections++;
    client.setNoDelay(true);
    const server = connect({ port: this.targetPort, host: this.targetHost });
    server.setNoDelay(true);
    const pair: Pair = { client, server, zombie: this.blackholed, cutting: undefined, upDue: 0, downDue: 0 };
    this.pairs.add(pair);
    const end = () => this.destroy(pair);
    client.on('error', end);
    server.on('error', end);
    client.on('close', end);
    server.on('close', end);
    client.on('data', (chunk: Buffer) => this.fromClient(pair, chunk));
    server.on('data', (chunk: Buffer) => this.fromServer(pair, chunk));
  }

  private fromClient(pair: Pair, chunk: Buffer): void {
    if (pair.zombie || pair.cutting) return;
    const cut = this.matchCut(chunk);
    if (cut) {
      this.pendingCuts = this.pendingCuts.filter((c) => c !== cut);
      pair.cutting = cut;
      if (!cut.opts.forward) return this.finishCut(cut);
      // The request reaches the server; its reply (or, for a blocking read, the wait) is cut off.
      this.forward(pair, 'up', chunk);
      setTimeout(() => this.finishCut(cut), cut.opts.replyWaitMs);
      return;
    }
    this.forward(pair, 'up', chunk);
  }

  private fromServer(pair: Pair, chunk: Buffer): void {
    if (pair.zombie) return;
    if (pair.cutting) {
      // the reply to the request being cut: lost, and the connections go with it
      this.finishCut(pair.cutting);
      return;
    }
    this.forward(pair, 'down', chunk);
  }

  private finishCut(cut: PendingCut): void {
    if (cut.done) return;
    cut.done = true;
    this.cutAll();
    cut.resolve();
  }

  private matchCut(chunk: Buffer): PendingCut | undefined {
    if (this.pendingCuts.length === 0) return undefined;
    const text = chunk.toString('latin1');
    return this.pendingCuts.find((c) => c.pattern.test(text));
  }

  /** Writes in order, each chunk no earlier than its latency allows. */
  private forward(pair: Pair, dir: 'up' | 'down', chunk: Buffer): void {
    const dst = dir === 'up' ? pair.server : pair.client;
    const latency = dir === 'up' ? this.upLatency : this.downLatency;
    const write = () => {
      if (pair.zombie || dst.destroyed) return;
      if (dir === 'down' && pair.cutting) return;
      dst.write(chunk);
    };
    if (latency === 0 && (dir === 'up' ? pair.upDue : pair.downDue) <= Date.now()) return write();
    const now = Date.now();
    const due = Math.max(now + latency, dir === 'up' ? pair.upDue : pair.downDue);
    if (dir === 'up') pair.upDue = due;
    else pair.downDue = due;
    setTimeout(write, due - now);
  }

  private destroy(pair: Pair): void {
    if (!this.pairs.delete(pair)) return;
    if (!pair.client.destroyed) pair.client.resetAndDestroy();
    if (!pair.server.destroyed) pair.server.destroy();
  }
}

export interface ProxiedSetup {
  /** The proxy of the current test. */
  proxy: () => FaultProxy;
  /** Connection options through the proxy; a short socket timeout so dead links show quickly. */
  via: () => RedisOptions;
  /** Closes `close` after the test, before the proxy stops (last registered, first closed). */
  closeAfter: (...close: (() => Promise<void>)[]) => void;
}

/** Mocha hooks: a fresh fault proxy in front of `server` for each test. */
export function useFaultProxy(server: () => { port: number }, socketTimeout: number): ProxiedSetup {
  let proxy: FaultProxy | undefined;
  const closers: (() => Promise<void>)[] = [];
  beforeEach(async () => {
    proxy = await new FaultProxy(server().port).start();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await proxy?.stop();
  });
  const current = () => {
    if (!proxy) throw new Error('the fault proxy is not started (use it inside tests)');
    return proxy;
  };
  return {
    proxy: current,
    via: () => ({ host: '127.0.0.1', port: current().port, socketTimeout }),
    closeAfter: (...close) => closers.push(...close),
  };
}
