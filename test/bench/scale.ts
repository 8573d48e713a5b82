/**
 * The scale section of `make bench` (issue 20): how cost grows with the work. Backlog depth, memory
 * at 1M waiting jobs and after they are gone, 100k delayed jobs due at once, the CLI over 1,000
 * queues, and big payloads. It runs once per bench run, not every round (the fills alone take
 * minutes); `--quick` runs it at 1/100 of the sizes (1/10 for the payload counts).
 */
import type { Redis } from 'ioredis';
import { record, type Results } from './report.js';
import { backlogDepth, delayedBurst, payloadRate } from './scale-figures.js';
import { cliTimes, makeQueues } from './scale-cli.js';
import { SCALE_ROWS } from './scale-rows.js';
import { SYSTEMS, type System } from './systems.js';

interface ScaleSizes {
  depths: { tag: string; n: number }[];
  /** Jobs processed (and timed) at each depth, added on top of it. */
  measured: number;
  delayed: number;
  /** The delayed jobs fall due this long after their fill is expected to end (ms). */
  leadMs: number;
  queues: number;
  jobsPerQueue: number;
  cliRuns: number;
  payloads: { tag: string; bytes: number; jobs: number }[];
  payMaxMs: number;
}

const FULL: ScaleSizes = {
  depths: [{ tag: '10k', n: 10_000 }, { tag: '100k', n: 100_000 }, { tag: '1m', n: 1_000_000 }],
  measured: 20_000,
  delayed: 100_000,
  leadMs: 2000,
  queues: 1000,
  jobsPerQueue: 3,
  cliRuns: 3,
  payloads: [{ tag: '1k', bytes: 1024, jobs: 20_000 }, { tag: '100k', bytes: 100 * 1024, jobs: 2_000 }, { tag: '1m', bytes: 1024 * 1024, jobs: 200 }],
  payMaxMs: 4000,
};
const QUICK: ScaleSizes = {
  depths: [{ tag: '10k', n: 100 }, { tag: '100k', n: 1_000 }, { tag: '1m', n: 10_000 }],
  measured: 2_000,
  delayed: 1_000,
  leadMs: 1000,
  queues: 10,
  jobsPerQueue: 3,
  cliRuns: 1,
  payloads: [{ tag: '1k', bytes: 1024, jobs: 2_000 }, { tag: '100k', bytes: 100 * 1024, jobs: 200 }, { tag: '1m', bytes: 1024 * 1024, jobs: 20 }],
  payMaxMs: 2000,
};

export interface ScaleContext {
  url: string;
  admin: Redis;
  quick: boolean;
  wanted: (key: string) => boolean;
  results: Results;
  log: (line: string) => void;
}

/** True when any scale row is selected (`--only scale.` or a part of it, or no --only). */
export function scaleWanted(wanted: (key: string) => boolean): boolean {
  return SCALE_ROWS.some((r) => wanted(r.key));
}

/** Runs the selected scale figures once for both systems; returns notes for the report. */
export async function runScale(ctx: ScaleContext): Promise<string[]> {
  const s = ctx.quick ? QUICK : FULL;
  const notes: string[] = [];
  const t0 = Date.now();
  let item = 0;
  const put = (key: string, sys: System['name'], v: number, unit: string) => {
    record(ctx.results, key, sys, v);
    ctx.log(`scale ${key.padEnd(20)} ${sys.padEnd(8)} ${v.toFixed(v < 10 ? 2 : 0)} ${unit}`);
  };
  /** Runs `fn` for each system on a flushed server, alternating which goes first between items. */
  const each = async (keys: string[], fn: (sys: System) => Promise<void>, systems = SYSTEMS) => {
    if (!keys.some(ctx.wanted)) return;
    const started = Date.now();
    const order = item++ % 2 ? [...systems].reverse() : systems;
    for (const sys of order) {
      await ctx.admin.flushall('SYNC');
      try {
        await fn(sys);
      } catch (err) {
        ctx.log(`  scale ${keys[0]} ${sys.name}: FAILED ${(err as Error).stack ?? String(err)}`);
      }
    }
    ctx.log(`scale ${keys[0].replace(/\.[^.]*$/, '')} took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  };

  const rates = new Map<string, number>();
  for (const { tag, n } of s.depths) {
    const deepest = tag === '1m';
    const keys = [`scale.depth${tag}.rate`, `scale.depth${tag}.cpu`, 'scale.depth.flat', ...(deepest ? ['scale.mem.job', 'scale.mem.left'] : [])];
    await each(keys, async (sys) => {
      const r = await backlogDepth(sys, ctx.url, ctx.admin, n, s.measured, deepest);
      put(`scale.depth${tag}.rate`, sys.name, r.rate, `jobs/s (${s.measured} jobs over ${n} waiting)`);
      put(`scale.depth${tag}.cpu`, sys.name, r.cpuUsPerJob, 'server CPU µs/job');
      rates.set(`${tag} ${sys.name}`, r.rate);
      if (r.memPerJob !== undefined) put('scale.mem.job', sys.name, r.memPerJob, `bytes/job at ${n} waiting`);
      if (r.leftBytes !== undefined) put('scale.mem.left', sys.name, r.leftBytes, 'bytes over the baseline once all were processed');
    });
  }
  for (const sys of SYSTEMS) {
    const flat = (rates.get(`1m ${sys.name}`) ?? NaN) / (rates.get(`10k ${sys.name}`) ?? NaN);
    if (Number.isFinite(flat)) put('scale.depth.flat', sys.name, flat, '× (rate at the deepest / shallowest backlog)');
  }

  await each(['scale.delay.drain', 'scale.delay.maxcall'], async (sys) => {
    const r = await delayedBurst(sys, ctx.url, ctx.admin, s.delayed, s.leadMs);
    put('scale.delay.drain', sys.name, r.drainMs, `ms from due to the last of ${s.delayed} done`);
    put('scale.delay.maxcall', sys.name, r.maxCallMs, `ms, longest call (${r.slowest || 'none over 0.1 ms'})`);
    if (r.late > 0) notes.push(`scale: ${sys.name}'s ${s.delayed} delayed jobs were all added ${r.late} ms after they fell due, which adds to its due → done time.`);
  });

  const glidemqOnly = SYSTEMS.filter((x) => x.name === 'glidemq');
  await each(['scale.queues.list', 'scale.queues.heal', 'scale.queues.audit', 'scale.queues.top'], async () => {
    await makeQueues(ctx.url, s.queues, s.jobsPerQueue);
    const r = await cliTimes(ctx.url, s.cliRuns);
    const unit = `ms, ${s.queues} queues, median of ${s.cliRuns}`;
    put('scale.queues.list', 'glidemq', r.list, unit);
    put('scale.queues.heal', 'glidemq', r.heal, unit);
    put('scale.queues.audit', 'glidemq', r.audit, unit);
    put('scale.queues.top', 'glidemq', r.top, `${unit}, its 1 s wait subtracted`);
  }, glidemqOnly);

  for (const { tag, bytes, jobs } of s.payloads) {
    await each([`scale.pay${tag}.rate`, `scale.pay${tag}.mbs`], async (sys) => {
      const r = await payloadRate(sys, ctx.url, bytes, jobs, s.payMaxMs);
      put(`scale.pay${tag}.rate`, sys.name, r.rate, `jobs/s (${bytes} bytes each)`);
      put(`scale.pay${tag}.mbs`, sys.name, r.mbs, 'MB/s of job data');
    });
  }

  ctx.log(`scale section took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  notes.push(
    'the scale rows ran once (not every round) to keep the run within its time budget: single measurements, so expect more noise than in the rows above.',
  );
  if (ctx.quick) notes.push('--quick: the scale rows ran at 1/100 of the sizes in their labels (payload counts 1/10).');
  if (ctx.wanted('scale.pay1m.rate') || ctx.wanted('scale.pay1m.mbs')) notes.push("scale: glidemq's Queue refuses job data over 512 KiB by default; the 1 MiB payload row raises maxPayloadBytes (BullMQ has no such limit).");
  return notes;
}
