/**
 * `glidemq exporter`: the Prometheus metrics (prometheus.ts) of many queues over one connection,
 * served over HTTP at /metrics, with the exporter's own:
 *   glidemq_up                    gauge: 1 when this scrape read the server, 0 when it could not
 *   glidemq_scrape_errors_total   counter: scrapes that could not read the server, since the exporter started
 *   glidemq_durable_writes{node,role}  gauge: the audit's verdict per node (ExporterOptions.durability),
 *                                 computed on its own interval, never per scrape
 * A scrape that cannot read the server answers 503 (or `downStatus`) with a body whose first line
 * says, as a comment, which server and what failed, then the exporter's own samples.
 */
import { createServer, type Server } from 'node:http';
import { acquireClient, closeClient, settleTopology, waitReady, type Acquired, type Client, type ConnectionInput } from '../connecting/connection.js';
import { DEFAULT_PREFIX, validateQueueName } from '../shared/keys.js';
import { ConnectionError, invalid } from '../shared/errors.js';
import { lastConnectionProblem } from '../connecting/connection-problems.js';
import { checkGlobalLabels, renderFamily, renderPrometheus, snapshotQueue } from '../inspecting/prometheus.js';
import { QueueSet } from './queue-set.js';
import { closeHttpServer, listenHttpServer } from '../shared/http-server.js';

export interface ExporterOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** The queues to export; none: every queue under the prefix, found again at each scrape. */
  queues?: string[];
  /** Extra labels on every sample. */
  globalVariables?: Record<string, string>;
  /**
   * Whether each node keeps acknowledged writes durable (for glidemq_durable_writes): `check` runs
   * at start and then every `intervalMs`, not per scrape (the CLI passes the audit's verdict).
   * `onError` hears a check that failed; the gauges then stay out until one succeeds.
   */
  durability?: { check: () => Promise<NodeDurability[]>; intervalMs: number; onError?: (err: unknown) => void };
  /** A scrape slower than this fails (ms; default 5000). */
  scrapeTimeoutMs?: number;
  /** The HTTP status of a scrape that cannot read the server: 503 (default) or 200 (Prometheus then keeps glidemq_up 0). */
  downStatus?: 200 | 503;
}

/** One node's durability verdict (glidemq_durable_writes). */
export interface NodeDurability {
  /** host:port */
  node: string;
  role: string;
  durable: boolean;
}

/** What one scrape produced: the text to serve, and why it could not read the server, if so. */
export interface Scrape {
  text: string;
  error?: unknown;
}

/**
 * The metrics of many queues over one connection: the Queue objects share it (they never close
 * it), and the queue list is found again at each scrape when none was named.
 */
export class PrometheusExporter {
  private readonly acquired: Acquired;
  private readonly prefix: string;
  private readonly named: string[] | undefined;
  private readonly globalVariables: Record<string, string>;
  /** Made once connected (a plain URL naming a cluster node becomes a cluster client). */
  private set: QueueSet | undefined;
  private server: Server | undefined;
  private label = 'the server';
  private scrapeErrors = 0;
  private durable: NodeDurability[] | undefined;
  private durabilityTimer: NodeJS.Timeout | undefined;
  /** Settles when the first durability check has (or never will without the option). */
  private firstDurabilityCheck: Promise<void> = Promise.resolve();
  private client: Client | undefined;
  private readonly opts: ExporterOptions;

  constructor(opts: ExporterOptions = {}) {
    this.prefix = opts.prefix ?? DEFAULT_PREFIX;
    this.named = opts.queues?.length ? opts.queues.map((q) => validateQueueName(q)) : undefined;
    this.globalVariables = checkGlobalLabels(opts.globalVariables);
    if (opts.durability && ('node' in this.globalVariables || 'role' in this.globalVariables)) {
      throw invalid('PrometheusExporter: the labels "node" and "role" are set by glidemq_durable_writes');
    }
    this.acquired = acquireClient(opts.connection);
    this.opts = opts;
  }

  /** Connects (failing with one line naming `label` when the server does not answer in time). */
  async connect(label: string, timeoutMs = 5000): Promise<void> {
    this.label = label;
    const c = await settleTopology(this.acquired);
    await waitReady(c, label, timeoutMs);
    this.set ??= new QueueSet(c, this.prefix, this.named);
    this.client = c;
    this.startDurabilityChecks();
  }

  /** Runs the durability check now and then on its interval (once; nothing without the option). */
  private startDurabilityChecks(): void {
    const d = this.opts.durability;
    if (!d || this.durabilityTimer) return;
    const run = (): Promise<void> =>
      d.check().then(
        (verdicts) => {
          this.durable = verdicts;
        },
        (err: unknown) => {
          this.durable = undefined;
          d.onError?.(err);
        },
      );
    this.durabilityTimer = setInterval(() => void run(), d.intervalMs);
    this.durabilityTimer.unref();
    this.firstDurabilityCheck = run();
  }

  /** Resolves once the first durability check has settled (at once without the option); true when it gave a verdict. */
  async durabilityKnown(): Promise<boolean> {
    await this.firstDurabilityCheck;
    return this.durable !== undefined;
  }

  private get queues(): QueueSet {
    if (!this.set) throw new Error('the exporter is not connected: call connect() first');
    return this.set;
  }

  /** The named queues nothing ever used (no meta hash): a typo, usually. Writes nothing. */
  missingQueues(): Promise<string[]> {
    return this.queues.missing();
  }

  /** One scrape: the text format for every queue covered (without named ones, every queue under the prefix now). */
  async render(): Promise<string> {
    const scrape = await this.scrape();
    if (scrape.error !== undefined) throw scrape.error;
    return scrape.text;
  }

  /**
   * One scrape, which never throws: the queues' metrics and the exporter's own (glidemq_up 1), or,
   * when the server cannot be read within the scrape timeout, the exporter's own (glidemq_up 0,
   * the error counted) and the error.
   */
  async scrape(): Promise<Scrape> {
    try {
      const text = await this.withTimeout(this.renderQueues());
      return { text: text + this.renderOwn(true) };
    } catch (error) {
      this.scrapeErrors += 1;
      return { text: this.renderOwn(false), error };
    }
  }

  private async renderQueues(): Promise<string> {
    // a client between connections queues commands until it is back: a scrape then fails at once
    const status = this.client?.status;
    if (status !== undefined && status !== 'ready') {
      throw new ConnectionError('ERR_CONNECTION', `cannot reach ${this.label}: ${lastConnectionProblem() ?? `not connected (${status})`}`);
    }
    const names = await this.queues.names();
    const snapshots = await Promise.all(names.map((n) => snapshotQueue(this.queues.get(n))));
    return renderPrometheus(snapshots, this.globalVariables);
  }

  private withTimeout<T>(work: Promise<T>): Promise<T> {
    const ms = this.opts.scrapeTimeoutMs ?? 5000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ConnectionError('ERR_CONNECTION', `${this.label} did not answer within ${ms} ms`)), ms);
    });
    work.catch(() => undefined); // (a late failure after the timeout is not news)
    return Promise.race([work, late]).finally(() => clearTimeout(timer));
  }

  /** Why a scrape failed, naming the server (a ConnectionError of this file names it already). */
  private describe(error: unknown): string {
    if (error instanceof ConnectionError) return error.message;
    return `cannot read the queues at ${this.label}: ${(error as Error)?.message ?? String(error)}`;
  }

  /** glidemq_up, glidemq_scrape_errors_total and, once known, glidemq_durable_writes. */
  private renderOwn(up: boolean): string {
    const g = this.globalVariables;
    return (
      renderFamily('glidemq_up', 'gauge', 'Whether this scrape read the server (1) or could not (0)', [[{}, up ? 1 : 0]], g) +
      renderFamily('glidemq_scrape_errors_total', 'counter', 'Scrapes that could not read the server since the exporter started', [[{}, this.scrapeErrors]], g) +
      renderFamily(
        'glidemq_durable_writes',
        'gauge',
        'Whether the node keeps acknowledged writes durable (1): glidemq audit finds no failing check on it (persistence, replication, confirmed writes); 0: a check fails. Refreshed on the exporter\'s audit interval',
        (this.durable ?? []).map((d) => [{ node: d.node, role: d.role }, d.durable ? 1 : 0]),
        g,
      )
    );
  }

  /**
   * Serves GET /metrics (404 for any other path, 405 for another method; 503, or `downStatus`, with
   * the reason when the server cannot be read) on `host`:`port`. Resolves with the port once it
   * listens (0: any free port). `onScrapeError` hears each failed scrape; `describe` words its
   * reason (one line naming the server and what failed; default: the error's message).
   */
  listen(port: number, host: string, onScrapeError?: (err: unknown) => void, describe?: (err: unknown) => string): Promise<number> {
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found: the metrics are at /metrics\n');
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { 'content-type': 'text/plain; charset=utf-8', allow: 'GET, HEAD' }).end('method not allowed\n');
        return;
      }
      void this.scrape().then(({ text, error }) => {
        let body = text;
        if (error !== undefined) {
          onScrapeError?.(error);
          // one line a person reads first (a comment, so the body stays in the text format)
          body = `# glidemq exporter: ${oneLine(describe ? describe(error) : this.describe(error))}\n${text}`;
        }
        res.writeHead(error === undefined ? 200 : (this.opts.downStatus ?? 503), { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        res.end(req.method === 'HEAD' ? undefined : body);
      });
    });
    this.server = server;
    return listenHttpServer(server, port, host);
  }

  /** Stops serving (open keep-alive connections are closed) and closes the connection. */
  async close(): Promise<void> {
    clearInterval(this.durabilityTimer);
    const server = this.server;
    this.server = undefined;
    if (server) await closeHttpServer(server);
    await this.set?.close();
    if (this.acquired.owned) await closeClient(this.acquired.client);
  }
}

/** `text` on one line (a reason may carry a newline). */
function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
