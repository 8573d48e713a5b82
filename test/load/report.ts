/**
 * Judging a load run from its samples: memory and structures flat after warm-up, structures within
 * their retention caps, throughput never collapsing; and the table and summary it prints.
 */
import type { Sample, StructureSizes } from './sampler.js';

/** Later samples may not grow beyond this over the early ones: max(last third) <= 1.5 x max(first third) + allowance. */
export const GROWTH_FACTOR = 1.5;
/** No interval after warm-up may drop below this fraction of the median throughput. */
export const MIN_THROUGHPUT_FRACTION = 0.3;
/** The events stream is trimmed with MAXLEN ~ 1000: whole nodes (stream-node-max-entries 100) go at once. */
export const EVENTS_CAP = 1000 + 100;

export interface QueueCaps {
  completedCount?: number;
  failedCount?: number;
  completedAgeMs?: number;
  failedAgeMs?: number;
  /** Largest backlog producers allow plus what can be in flight. */
  stream: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)];
}

/** A problem line when the series grows: max of the last third over the bound from the first third. */
export function growth(what: string, series: number[], allowance: number): string | undefined {
  const third = Math.floor(series.length / 3);
  if (third < 1) return `${what}: too few samples (${series.length}) to judge`;
  const early = Math.max(...series.slice(0, third));
  const late = Math.max(...series.slice(series.length - third));
  const bound = GROWTH_FACTOR * early + allowance;
  return late > bound ? `${what} grew: max of the last third ${late} > ${GROWTH_FACTOR} x ${early} + ${allowance} = ${bound}` : undefined;
}

export function throughputProblems(measured: Sample[]): string[] {
  const rates = measured.map((s) => s.jobsPerSec);
  const med = median(rates);
  const floor = MIN_THROUGHPUT_FRACTION * med;
  return measured.filter((s) => s.jobsPerSec < floor).map((s) => `throughput at t=${s.t}s: ${s.jobsPerSec} jobs/s < ${MIN_THROUGHPUT_FRACTION} x median ${med}`);
}

export function capProblems(samples: Sample[], caps: Record<string, QueueCaps>, startedAt: number): string[] {
  const out: string[] = [];
  const slackMs = 1500; // a rule is applied at the next finish, and the sample is taken while jobs finish
  for (const s of samples) {
    for (const [q, c] of Object.entries(caps)) {
      const z: StructureSizes = s.queues[q];
      const at = `${q} at t=${s.t}s`;
      if (c.completedCount !== undefined && z.completed > c.completedCount) out.push(`${at}: ${z.completed} completed kept > ${c.completedCount}`);
      if (c.failedCount !== undefined && z.failed > c.failedCount) out.push(`${at}: ${z.failed} failed kept > ${c.failedCount}`);
      if (c.completedAgeMs !== undefined && z.oldestCompletedMs > c.completedAgeMs + slackMs) out.push(`${at}: oldest completed ${z.oldestCompletedMs} ms > ${c.completedAgeMs} ms`);
      if (c.failedAgeMs !== undefined && z.oldestFailedMs > c.failedAgeMs + slackMs) out.push(`${at}: oldest failed ${z.oldestFailedMs} ms > ${c.failedAgeMs} ms`);
      if (z.events > EVENTS_CAP) out.push(`${at}: events stream ${z.events} > ${EVENTS_CAP}`);
      if (z.stream > c.stream) out.push(`${at}: job stream ${z.stream} entries > ${c.stream}`);
      const minutes = Math.floor((Date.now() - startedAt) / 60000) + 2;
      if (z.metricsMinutes > minutes) out.push(`${at}: ${z.metricsMinutes} metric minutes > ${minutes}`);
    }
  }
  return out;
}

/** Memory, key count and every per-queue structure must be flat after warm-up. */
export function flatnessProblems(measured: Sample[], queues: string[]): string[] {
  const MB = 1024 * 1024;
  const found = [
    growth('used_memory', measured.map((s) => s.usedMemory), 2 * MB),
    growth('keys', measured.map((s) => s.keys), 500),
  ];
  for (const q of queues) {
    for (const f of ['stream', 'events', 'completed', 'failed', 'dedup', 'streamBytes'] as const) {
      found.push(growth(`${q} ${f}`, measured.map((s) => s.queues[q][f]), f === 'streamBytes' ? 256 * 1024 : 200));
    }
  }
  return found.filter((p): p is string => p !== undefined);
}

const mb = (n: number) => (n / 1024 / 1024).toFixed(2);

export function table(samples: Sample[], queues: string[]): string {
  const head = ['t(s)', 'jobs/s', 'used_mem(MB)', 'dataset(MB)', 'keys', ...queues.flatMap((q) => [`${q}:stream`, 'events', 'compl', 'failed', 'dedup', 'sched'])];
  const rows = samples.map((s) => [
    s.t, s.jobsPerSec, mb(s.usedMemory), mb(s.dataset), s.keys,
    ...queues.flatMap((q) => {
      const z = s.queues[q];
      return [z.stream, z.events, z.completed, z.failed, z.dedup, z.scheduled];
    }),
  ].map(String));
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => c.padStart(widths[i])).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

export function summary(measured: Sample[], jobs: { producers: number; workers: number; produced: number; completed: number; failed: number; lost: number; seconds: number }): string {
  const rates = measured.map((s) => s.jobsPerSec);
  const first = measured[0];
  const last = measured[measured.length - 1];
  return [
    `load: ${jobs.producers} producers, ${jobs.workers} workers, ${jobs.seconds}s`,
    `jobs: ${jobs.produced} produced, ${jobs.completed} completed, ${jobs.failed} failed (as designed), lost ${jobs.lost}`,
    `throughput after warm-up: median ${median(rates)} jobs/s, min ${Math.min(...rates)}, max ${Math.max(...rates)}`,
    `used_memory after warm-up: ${mb(first.usedMemory)} MB -> ${mb(last.usedMemory)} MB (max ${mb(Math.max(...measured.map((s) => s.usedMemory)))} MB); keys ${first.keys} -> ${last.keys}`,
  ].join('\n');
}
