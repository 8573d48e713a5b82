/**
 * Queue metrics in the Prometheus text format (version 0.0.4): Queue.exportPrometheusMetrics(), as
 * BullMQ has it (`bullmq_job_count{queue="q",state="waiting"} 3`, here with the glidemq_ prefix),
 * and what the exporter `glidemq exporter` serves over HTTP for every queue under a prefix
 * (prometheus-exporter.ts). The text is rendered from plain numbers (QueueSnapshot).
 *
 * What is exported, per queue (label `queue`, plus any global labels):
 *   glidemq_job_count{state}            gauge: jobs per state, as getJobCounts() / `glidemq stats`
 *   glidemq_job_completed_24h           gauge: completed attempts in the last 24 hours
 *   glidemq_job_failed_24h              gauge: failed attempts (retried ones included), last 24 hours
 *   glidemq_job_processing_seconds_avg  gauge: processing time per attempt over those 24 hours
 *   glidemq_oldest_waiting_seconds      gauge: age of the oldest waiting job (0 when none waits)
 *   glidemq_workers                     gauge: live workers in the queue's registry
 *   glidemq_queue_paused                gauge: 1 while the queue is paused
 *   glidemq_jobs_completed_total        counter: jobs completed since the queue began
 *   glidemq_jobs_failed_total           counter: jobs failed for good since the queue began
 *   glidemq_job_processing_seconds{outcome}  histogram: processing time of the attempts workers
 *                                       finished, completed or failed (retried ones included)
 * The last three are kept on the server for good (lifetime-metrics.ts), so rate() works on them.
 * The completed and failed figures are sums over the server's per-minute metrics
 * (src/engine/inspecting/metrics.ts), which keep 24 hours and no all-time total: a sum that drops as old
 * minutes leave the window is a gauge, not a counter (Prometheus would read every drop as a reset).
 */
import { invalid } from '../shared/errors.js';
import { METRICS_RETENTION_MINUTES } from './metrics.js';
import { readQueue, type ReadableQueue } from './queue-reading.js';
import { PROCESSING_BOUNDS_MS, type LifetimeMetrics } from './lifetime-metrics.js';

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
  /** The lifetime counters and histogram (absent: not rendered). */
  lifetime?: LifetimeMetrics;
}

/** Reads what the metrics of `queue` need (a few read-only calls, made at once). */
export async function snapshotQueue(queue: ReadableQueue): Promise<QueueSnapshot> {
  const [r, lifetime] = await Promise.all([readQueue(queue, METRICS_RETENTION_MINUTES), queue.getLifetimeMetrics()]);
  return {
    queue: queue.name,
    counts: Object.fromEntries(PROMETHEUS_STATES.map((s) => [s, r.counts[s]])) as QueueSnapshot['counts'],
    paused: r.counts.isPaused,
    completed: r.metrics.completed,
    failed: r.metrics.failed,
    processingMs: r.metrics.processingMs,
    oldestWaitingMs: r.oldestWaitingMs,
    workers: r.workers,
    lifetime,
  };
}

export type MetricType = 'gauge' | 'counter' | 'histogram';

/** One sample: its labels, value, and for a histogram the suffix of its name (_bucket, _sum, _count). */
export type Sample = [labels: Record<string, string>, value: number, suffix?: string];

interface Family {
  name: string;
  help: string;
  /** gauge when not said. */
  type?: MetricType;
  samples: (s: QueueSnapshot) => Sample[];
}

/** A histogram of processing times in ms as samples in seconds: cumulative _bucket{le}, _sum, _count. */
function histogramSamples(h: { cumulative: number[]; count: number; sumMs: number }, labels: Record<string, string>): Sample[] {
  const les = [...PROCESSING_BOUNDS_MS.map((ms) => formatValue(ms / 1000)), '+Inf'];
  return [
    ...les.map((le, i): Sample => [{ ...labels, le }, h.cumulative[i], '_bucket']),
    [labels, h.sumMs / 1000, '_sum'],
    [labels, h.count, '_count'],
  ];
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
  {
    name: 'glidemq_jobs_completed_total',
    help: 'Jobs completed since the queue began (kept on the server)',
    type: 'counter',
    samples: (s) => (s.lifetime ? [[{}, s.lifetime.completed]] : []),
  },
  {
    name: 'glidemq_jobs_failed_total',
    help: 'Jobs failed for good since the queue began: no retry left, stalled too often, revoked, or failed by a child (kept on the server)',
    type: 'counter',
    samples: (s) => (s.lifetime ? [[{}, s.lifetime.failed]] : []),
  },
  {
    name: 'glidemq_job_processing_seconds',
    help: 'Processing time of the attempts workers finished since the queue began, by outcome (failed: retried ones included)',
    type: 'histogram',
    samples: (s) =>
      s.lifetime
        ? [
            ...histogramSamples(s.lifetime.processing.completed, { outcome: 'completed' }),
            ...histogramSamples(s.lifetime.processing.failed, { outcome: 'failed' }),
          ]
        : [],
  },
];

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** The labels the metrics set themselves: a global label may not take these names. */
const RESERVED_LABELS = new Set(['queue', 'state', 'outcome', 'le']);

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
    if (RESERVED_LABELS.has(name)) throw invalid(`exportPrometheusMetrics: the label "${name}" is set by the metrics themselves`);
    if (typeof value !== 'string' && typeof value !== 'number') throw invalid(`exportPrometheusMetrics: the value of label "${name}" must be a string`);
  }
  return globalVariables;
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  return Number.isInteger(v) ? String(v) : String(Number(v.toFixed(6)));
}

function sampleLine(name: string, [labels, value, suffix]: Sample, global: [string, string][]): string {
  const all = [...Object.entries(labels), ...global];
  const set = all.length ? `{${all.map(([k, v]) => `${k}="${escapeLabelValue(String(v))}"`).join(',')}}` : '';
  return `${name}${suffix ?? ''}${set} ${formatValue(value)}`;
}

/** The text format of `snapshots` (each metric's HELP and TYPE once, then its samples per queue). */
export function renderPrometheus(snapshots: QueueSnapshot[], globalVariables?: Record<string, string>): string {
  const global = Object.entries(checkGlobalLabels(globalVariables));
  const lines: string[] = [];
  for (const f of FAMILIES) {
    const samples = snapshots.flatMap((s) => f.samples(s).map(([labels, value, suffix]): Sample => [{ queue: s.queue, ...labels }, value, suffix]));
    if (samples.length === 0 && f.type !== undefined) continue; // (the lifetime families of snapshots without them)
    lines.push(`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type ?? 'gauge'}`);
    for (const sample of samples) lines.push(sampleLine(f.name, sample, global));
  }
  return lines.join('\n') + '\n';
}

/**
 * One metric family outside the per-queue ones (the exporter's own: glidemq_up, its scrape errors,
 * the durability gauge), in the text format, with the global labels on every sample. Nothing when
 * it has no sample.
 */
export function renderFamily(name: string, type: MetricType, help: string, samples: Sample[], globalVariables?: Record<string, string>): string {
  if (samples.length === 0) return '';
  const global = Object.entries(checkGlobalLabels(globalVariables));
  return [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples.map((s) => sampleLine(name, s, global))].join('\n') + '\n';
}
