/**
 * `glidemq exporter`: the Prometheus metrics (prometheus.ts) of many queues over one connection,
 * served over HTTP at /metrics.
 */
import { createServer, type Server } from 'node:http';
import { acquireClient, closeClient, settleTopology, waitReady, type Acquired, type ConnectionInput } from '../connecting/connection.js';
import { DEFAULT_PREFIX, validateQueueName } from '../shared/keys.js';
import { checkGlobalLabels, renderPrometheus, snapshotQueue } from '../inspecting/prometheus.js';
import { QueueSet } from './queue-set.js';

export interface ExporterOptions {
  connection?: ConnectionInput;
  prefix?: string;
  /** The queues to export; none: every queue under the prefix, found again at each scrape. */
  queues?: string[];
  /** Extra labels on every sample. */
  globalVariables?: Record<string, string>;
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

  constructor(opts: ExporterOptions = {}) {
    this.prefix = opts.prefix ?? DEFAULT_PREFIX;
    this.named = opts.queues?.length ? opts.queues.map((q) => validateQueueName(q)) : undefined;
    this.globalVariables = checkGlobalLabels(opts.globalVariables);
    this.acquired = acquireClient(opts.connection);
  }

  /** Connects (failing with one line naming `label` when the server does not answer in time). */
  async connect(label: string, timeoutMs = 5000): Promise<void> {
    const c = await settleTopology(this.acquired);
    await waitReady(c, label, timeoutMs);
    this.set ??= new QueueSet(c, this.prefix, this.named);
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
    const names = await this.queues.names();
    const snapshots = await Promise.all(names.map((n) => snapshotQueue(this.queues.get(n))));
    return renderPrometheus(snapshots, this.globalVariables);
  }

  /**
   * Serves GET /metrics (404 for any other path, 405 for another method; 503 with the reason when
   * the server cannot be read) on `host`:`port`. Resolves with the port once it listens (0: any
   * free port). `onScrapeError` hears each failed scrape.
   */
  listen(port: number, host: string, onScrapeError?: (err: unknown) => void): Promise<number> {
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
      this.render().then(
        (text) => {
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
          res.end(req.method === 'HEAD' ? undefined : text);
        },
        (err: unknown) => {
          onScrapeError?.(err);
          res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end(`cannot read the queues: ${(err as Error)?.message ?? String(err)}\n`);
        },
      );
    });
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        const addr = server.address();
        resolve(typeof addr === 'object' && addr ? addr.port : port);
      });
    });
  }

  /** Stops serving (open keep-alive connections are closed) and closes the connection. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
    await this.set?.close();
    if (this.acquired.owned) await closeClient(this.acquired.client);
  }
}
