/**
 * Queue metrics in the Prometheus text format (version 0.0.4): Queue.exportPrometheusMetrics(), as
 * BullMQ has it (`bullmq_job_count{queue="q",state="waiting"} 3`, here with the glidemq_ prefix),
 * and the exporter `glidemq exporter` serves over HTTP for every queue under a prefix.
 *
 * What is exported, per queue (label `queue`, plus any global labels):
 *   glidemq_job_count{state}            gauge: jobs per state, as getJobCounts() / `glidemq stats`
 *   glidemq_job_completed_24h           gauge: completed attempts in the last 24 hours
 *   glidemq_job_failed_24h              gauge: failed attempts (retried ones included), last 24 hours
 *   glidemq_job_processing_seconds_avg  gauge: processing time per attempt over those 24 hours
 *   glidemq_oldest_waiting_seconds      gauge: age of the oldest waiting job (0 when none waits)
 *   glidemq_workers                     gauge: live workers in the queue's registry
 *   glidemq_queue_paused                gauge: 1 while the queue is paused
 * The completed and failed figures are sums over the server's per-minute metrics
 * (src/engine/metrics.ts), which keep 24 hours and no all-time total: a sum that drops as old
 * minutes leave the window is a gauge, not a counter (Prometheus would read every drop as a reset).
 */
import { createServer, type Server } from 'node:http';
import { acquireClient, closeClient, settleTopology, waitReady, type Acquired, type ConnectionInput } from './connection.js';
import { invalid } from './errors.js';
import { DEFAULT_PREFIX, validateQueueName } from './keys.js';
import { METRICS_RETENTION_MINUTES } from './metrics.js';
import type { Queue } from './queue.js';
import { QueueSet, readQueue } from './queue-set.js';

/** The states of glidemq_job_count, in `glidemq stats` order. */
export const PROMETHEUS_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused'] as const;

/** What one queue's metrics are made of (read by snapshotQueue). */
export interface QueueSnapshot {
  queue: string;
  counts: Record<(typeof PROMETHEUS_STATES)[number], number>;
  paused: boolean;
  /** Over the last 24 hours of per-minute metrics. */
  completed: number;
  failed: number;
  processingMs: number;
  /** ms, null when no job waits. */
  oldestWaitingMs: number | null;
  workers: number;
}

/** Reads what the metrics of `queue` need (a few read-only calls, made at once). */
export async function snapshotQueue(queue: Queue): Promise<QueueSnapshot> {
  const r = await readQueue(queue, METRICS_RETENTION_MINUTES);
  return {
    queue: queue.name,
    counts: Object.fromEntries(PROMETHEUS_STATES.map((s) => [s, r.counts[s]])) as QueueSnapshot['counts'],
    paused: r.counts.isPaused,
    completed: r.metrics.completed,
    failed: r.metrics.failed,
    processingMs: r.metrics.processingMs,
    oldestWaitingMs: r.oldestWaitingMs,
    workers: r.workers,
  };
}

interface Family {
  name: string;
  help: string;
  samples: (s: QueueSnapshot) => [labels: Record<string, string>, value: number][];
}

const FAMILIES: Family[] = [
  {
    name: 'glidemq_job_count',
    help: 'Number of jobs in the queue by state',
    samples: (s) => PROMETHEUS_STATES.map((state) => [{ state }, s.counts[state]]),
  },
  {
    name: 'glidemq_job_completed_24h',
    help: 'Completed attempts in the last 24 hours (per-minute metrics)',
    samples: (s) => [[{}, s.completed]],
  },
  {
    name: 'glidemq_job_failed_24h',
    help: 'Failed attempts in the last 24 hours, retried ones included (per-minute metrics)',
    samples: (s) => [[{}, s.failed]],
  },
  {
    name: 'glidemq_job_processing_seconds_avg',
    help: 'Average processing time of an attempt in the last 24 hours, in seconds',
    samples: (s) => [[{}, s.completed + s.failed === 0 ? 0 : s.processingMs / (s.completed + s.failed) / 1000]],
  },
  {
    name: 'glidemq_oldest_waiting_seconds',
    help: 'Age of the oldest waiting job (queue latency), in seconds; 0 when no job waits',
    samples: (s) => [[{}, (s.oldestWaitingMs ?? 0) / 1000]],
  },
  {
    name: 'glidemq_workers',
    help: 'Live workers of the queue (its worker registry)',
    samples: (s) => [[{}, s.workers]],
  },
  {
    name: 'glidemq_queue_paused',
    help: 'Whether the queue is paused (1) or not (0)',
    samples: (s) => [[{}, s.paused ? 1 : 0]],
  },
];

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Label values escaped as the text format wants them (backslash, double quote, newline). */
export function escapeLabelValue(value: string): string {
  return String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** The extra labels every sample gets, checked: valid names, none that the metrics set themselves. */
export function checkGlobalLabels(globalVariables: Record<string, string> | undefined): Record<string, string> {
  if (globalVariables === undefined) return {};
  if (typeof globalVariables !== 'object' || globalVariables === null) throw invalid('exportPrometheusMetrics: globalVariables must be an object of label names to values');
  for (const [name, value] of Object.entries(globalVariables)) {
    if (!LABEL_NAME.test(name) || name.startsWith('__')) throw invalid(`exportPrometheusMetrics: "${name}" is not a Prometheus label name`);
    if (name === 'queue' || name === 'state') throw invalid(`exportPrometheusMetrics: the label "${name}" is set by the metrics themselves`);
    if (typeof value !== 'string' && typeof value !== 'number') throw invalid(`exportPrometheusMetrics: the value of label "${name}" must be a string`);
  }
  return globalVariables;
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  return Number.isInteger(v) ? String(v) : String(Number(v.toFixed(6)));
}

/** The text format of `snapshots` (each metric's HELP and TYPE once, then its samples per queue). */
export function renderPrometheus(snapshots: QueueSnapshot[], globalVariables?: Record<string, string>): string {
  const global = Object.entries(checkGlobalLabels(globalVariables));
  const lines: string[] = [];
  for (const f of FAMILIES) {
    lines.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} gauge`);
    for (const s of snapshots) {
      for (const [labels, value] of f.samples(s)) {
        const all = [['queue', s.queue], ...Object.entries(labels), ...global];
        lines.push(`${f.name}{${all.map(([k, v]) => `${k}="${escapeLabelValue(String(v))}"`).join(',')}} ${formatValue(value)}`);
      }
    }
  }
  return lines.join('\n') + '\n';
}

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
