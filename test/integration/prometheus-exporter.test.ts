/**
 * The Prometheus exporter read as Prometheus reads it (issue 32): its output parsed with a
 * text-format parser (parse-prometheus-text-format), checking names, types, labels and values;
 * the lifetime counters kept on the server rising with completed and failed jobs on every path
 * (a processor's failure, a timeout, a revoke, a stall); the processing-time histogram;
 * glidemq_up, glidemq_scrape_errors_total and the one-line reason when the server is down; and the
 * durability gauge from the audit's verdict (issue 31). One server for the file, stopped by the
 * last test.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { PrometheusExporter } from '../../src/engine/operating/prometheus-exporter.js';
import { PROCESSING_BOUNDS_MS } from '../../src/engine/inspecting/lifetime-metrics.js';
import { runAudit } from '../../src/audit/audit.js';
import { verdictsByNode } from '../../src/audit/verdicts.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { claimAs, upkeep } from '../helpers/recovery.js';
import { useServer, waitFor } from '../helpers/valkey.js';

interface ParsedMetric {
  labels?: Record<string, string>;
  value?: string;
}
interface ParsedFamily {
  name: string;
  help: string;
  type: 'GAUGE' | 'COUNTER' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  metrics: ParsedMetric[];
}
const parsePrometheus = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => ParsedFamily[];

/** A scrape parsed: each family by name. */
function families(text: string): Map<string, ParsedFamily> {
  return new Map(parsePrometheus(text).map((f) => [f.name, f]));
}

/** The value of `name`'s sample whose labels include `labels`, as a number (undefined: no such sample). */
function value(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  // the parser merges a labelled histogram's series into one and drops their labels: read its
  // _bucket, _sum and _count series as the untyped samples they are
  const plain = text.replace(/^# TYPE (\S+) histogram$/gm, '# TYPE $1 untyped');
  // (each run of one name is a family to the parser: a histogram's series alternate by outcome)
  const samples = parsePrometheus(plain).filter((f) => f.name === name).flatMap((f) => f.metrics);
  const m = samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels?.[k] === v));
  return m ? Number(m.value) : undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs until `signal` aborts (a job's timeout), then throws its reason. */
function untilAborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (!signal) return reject(new Error('no signal given'));
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

describe('Prometheus exporter: counters, histogram, glidemq_up, scrape errors, durability (parsed)', function () {
  this.timeout(20000);
  const server = useServer();
  const h = new Harness(server);
  let exporter: PrometheusExporter;
  let url: string;
  after(async () => {
    await h.cleanup();
    await exporter?.close();
  });

  async function scrape(): Promise<{ status: number; text: string }> {
    const res = await fetch(url);
    return { status: res.status, text: await res.text() };
  }

  before(async () => {
    exporter = new PrometheusExporter({
      connection: { url: server().url, options: { retryStrategy: () => 100 } },
      scrapeTimeoutMs: 2000,
      durability: {
        intervalMs: 60_000,
        check: async () => verdictsByNode(await runAudit({ url: server().url, cluster: false })),
      },
    });
    await exporter.connect(server().url);
    url = `http://127.0.0.1:${await exporter.listen(0, '127.0.0.1')}/metrics`;
  });

  it('the histogram bounds of the Lua library and of the reader agree', () => {
    const lua = readFileSync(join(REPO_ROOT, 'lua', 'metrics-buckets.lua'), 'utf8');
    const bounds = /local BOUNDS_MS = \{ ([\d, ]+) \}/.exec(lua)?.[1].split(',').map(Number);
    expect(bounds).to.deep.equal([...PROCESSING_BOUNDS_MS]);
  });

  it('names, types and labels as a parser reads them; counters rise with completed and failed jobs on every path', async () => {
    const name = uniqueQueue('prom');
    const q = h.queue(name);
    const before = await scrape();
    expect(before.status).to.equal(200);
    const f = families(before.text);
    const types = Object.fromEntries([...f.values()].map((x) => [x.name, x.type]));
    expect(types).to.include({
      glidemq_job_count: 'GAUGE',
      glidemq_up: 'GAUGE',
      glidemq_scrape_errors_total: 'COUNTER',
    });
    expect(value(before.text, 'glidemq_up')).to.equal(1);
    expect(value(before.text, 'glidemq_scrape_errors_total')).to.equal(0);
    for (const fam of f.values()) expect(fam.help, fam.name).to.not.equal('');

    // completed: 3 (one slow enough for a higher bucket); failed for good: a processor's failure
    // with its retry used up, a timeout, a revoke, a stall; one failed attempt retried
    const w = h.worker(
      name,
      async (job, _token, signal) => {
        if (job.name === 'slow') await sleep(40); // (the server's ms stamps of start and finish may read 1 ms short of a timer's wait)
        if (job.name === 'bad') throw new Error('boom');
        if (job.name === 'hang') await untilAborted(signal);
        return 'ok';
      },
      { concurrency: 4 },
    );
    await q.add('ok', {});
    await q.add('ok', {});
    await q.add('slow', {});
    await q.add('bad', {}, { attempts: 2 });
    await q.add('hang', {}, { timeout: 50 });
    await waitFor(async () => (await q.getCompletedCount()) === 3 && (await q.getFailedCount()) === 2, 'the worker jobs to finish');
    await w.close();
    const revoked = await q.add('never', {});
    expect(await q.revoke(revoked.id!)).to.equal('revoked');
    await q.add('stalls', {});
    await claimAs(q, 'dead', 1, { lockDuration: 100, maxStalledCount: 0 });
    const m = upkeep(q, { lockDuration: 100 });
    await waitFor(async () => (await m.reclaimStalled('reclaimer')).failed.length === 1, 'the stalled job to fail');

    const after = await scrape();
    const labels = { queue: name };
    expect(families(after.text).get('glidemq_jobs_completed_total')?.type).to.equal('COUNTER');
    expect(families(after.text).get('glidemq_jobs_failed_total')?.type).to.equal('COUNTER');
    expect(families(after.text).get('glidemq_job_processing_seconds')?.type).to.equal('HISTOGRAM');
    expect(value(after.text, 'glidemq_jobs_completed_total', labels)).to.equal(3);
    expect(value(after.text, 'glidemq_jobs_failed_total', labels)).to.equal(4); // bad, hang, revoked, stalled
    expect(value(after.text, 'glidemq_job_count', { ...labels, state: 'failed' })).to.equal(4);

    // the histogram: the attempts workers finished (bad's two attempts, hang's one), cumulative
    const done = { ...labels, outcome: 'completed' };
    const failed = { ...labels, outcome: 'failed' };
    expect(value(after.text, 'glidemq_job_processing_seconds_count', done)).to.equal(3);
    expect(value(after.text, 'glidemq_job_processing_seconds_count', failed)).to.equal(3);
    expect(value(after.text, 'glidemq_job_processing_seconds_bucket', { ...done, le: '+Inf' })).to.equal(3);
    expect(value(after.text, 'glidemq_job_processing_seconds_bucket', { ...done, le: '0.025' })).to.be.at.most(2);
    expect(value(after.text, 'glidemq_job_processing_seconds_sum', done)).to.be.at.least(0.03);
    let last = 0;
    for (const ms of PROCESSING_BOUNDS_MS) {
      const n = value(after.text, 'glidemq_job_processing_seconds_bucket', { ...done, le: String(ms / 1000) });
      expect(n, `le ${ms / 1000}`).to.be.a('number').and.at.least(last);
      last = n!;
    }

    // a counter never drops: cleaning the finished jobs leaves it
    await q.clean(0, 100, 'completed');
    await q.clean(0, 100, 'failed');
    const cleaned = await scrape();
    expect(value(cleaned.text, 'glidemq_job_count', { ...labels, state: 'completed' })).to.equal(0);
    expect(value(cleaned.text, 'glidemq_jobs_completed_total', labels)).to.equal(3);
    expect(value(cleaned.text, 'glidemq_jobs_failed_total', labels)).to.equal(4);
  });

  it('glidemq_durable_writes per node from the audit\'s verdict, with its HELP', async () => {
    expect(await exporter.durabilityKnown()).to.equal(true);
    const report = await runAudit({ url: server().url, cluster: false });
    const { text } = await scrape();
    const fam = families(text).get('glidemq_durable_writes');
    expect(fam?.type).to.equal('GAUGE');
    expect(fam?.help).to.match(/acknowledged writes durable/);
    expect(fam?.metrics).to.have.length(report.nodes.length);
    const node = report.nodes[0];
    const durable = node.checks.every((c) => c.status !== 'fail') ? 1 : 0;
    expect(value(text, 'glidemq_durable_writes', { node: node.address, role: node.role })).to.equal(durable);
  });

  it('server down: 503 whose first line names the server and what failed, glidemq_up 0, the error counted', async () => {
    await h.cleanup();
    await server().stop();
    const first = await scrape();
    expect(first.status).to.equal(503);
    const [line, ...rest] = first.text.split('\n');
    expect(line).to.equal(line.trim());
    expect(line).to.match(/^# glidemq exporter: /);
    expect(line).to.include(server().url).and.match(/cannot reach|did not answer/);
    expect(value(rest.join('\n'), 'glidemq_up')).to.equal(0);
    expect(value(first.text, 'glidemq_scrape_errors_total')).to.equal(1);
    expect(families(first.text).has('glidemq_job_count')).to.equal(false);
    const second = await scrape();
    expect(value(second.text, 'glidemq_scrape_errors_total')).to.equal(2);
  });
});
