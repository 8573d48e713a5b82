import { expect } from 'chai';
import { createServer } from 'node:net';
import { Queue } from '../../src/engine/queue/queue.js';
import { renderPrometheus } from '../../src/engine/inspecting/prometheus.js';
import { runCli, startCli, type RunningCli } from '../helpers/cli.js';
import { useCliSuite } from '../helpers/cli-suite.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, TestServer, waitFor } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

/** `name{labels} value` lines of a scrape, keyed by name and labels as written. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-z_0-9]+)(\{.*\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    out.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
  }
  return out;
}

/** The exporter's start line (--json): where it listens. */
async function started(exporter: RunningCli): Promise<string> {
  const line = (await waitFor(() => exporter.stdout().split('\n').find((l) => l.startsWith('{')), 'the exporter to listen')) as string;
  return (JSON.parse(line) as { url: string }).url;
}

describe('CLI: exporter (Prometheus metrics)', function () {
  this.timeout(60000);
  let q: Queue;
  let name: string;
  const { server, cli, start, harness } = useCliSuite('prom', (made) => ({ q, name } = made));

  /** Jobs in every state: 2 completed, 1 failed, 2 waiting, 1 prioritized, 1 delayed; a live worker stays. */
  async function populate(): Promise<void> {
    const w = harness.worker(name, async (job) => {
      if (job.name === 'bad') throw new Error('boom');
      return 'ok';
    });
    await q.add('good', {});
    await q.add('good', {});
    await q.add('bad', {});
    await waitFor(async () => (await q.getCompletedCount()) === 2 && (await q.getFailedCount()) === 1, 'the first jobs finished');
    await w.pause(true); // stays registered, takes nothing more
    await q.add('w', {});
    await q.add('w', {});
    await q.add('p', {}, { priority: 2 });
    await q.add('d', {}, { delay: 600_000 });
    await waitFor(async () => ((await q.getOldestWaitingAge()) ?? 0) > 0, 'a job waiting');
  }

  it('serves /metrics: the numbers match `stats --json` and `metrics --json`; other paths 404; SIGTERM exits 0', async () => {
    await populate();
    const exporter = start(['--json', 'exporter', '--port', '0', name]);
    try {
      const url = await started(exporter);
      const res = await fetch(url);
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
      const text = await res.text();
      expect(text).to.include('# TYPE glidemq_job_count gauge');
      expect(text.endsWith('\n')).to.equal(true);
      const m = samples(text);

      const stats = JSON.parse((await cli(['stats', name, '--json'])).stdout) as Record<string, number>;
      for (const state of ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused']) {
        expect(m.get(`glidemq_job_count{queue="${name}",state="${state}"}`), state).to.equal(stats[state]);
      }
      expect(stats).to.include({ waiting: 2, prioritized: 1, delayed: 1, completed: 2, failed: 1 });

      const metrics = JSON.parse((await cli(['metrics', name, '--json', '--minutes', '1440'])).stdout) as { completed: number; failed: number; avgMs: number };
      expect(m.get(`glidemq_job_completed_24h{queue="${name}"}`)).to.equal(metrics.completed).and.to.equal(2);
      expect(m.get(`glidemq_job_failed_24h{queue="${name}"}`)).to.equal(metrics.failed).and.to.equal(1);
      expect(m.get(`glidemq_job_processing_seconds_avg{queue="${name}"}`)).to.be.closeTo(metrics.avgMs / 1000, 0.001);
      expect(m.get(`glidemq_workers{queue="${name}"}`)).to.equal(1);
      expect(m.get(`glidemq_queue_paused{queue="${name}"}`)).to.equal(0);
      expect(m.get(`glidemq_oldest_waiting_seconds{queue="${name}"}`)).to.be.above(0);

      expect((await fetch(url.replace('/metrics', '/'))).status).to.equal(404);
      expect((await fetch(url.replace('/metrics', '/other'))).status).to.equal(404);
      expect((await fetch(url, { method: 'POST' })).status).to.equal(405);
    } finally {
      const r = await exporter.stop('SIGTERM');
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stderr).to.equal('');
    }
  });

  it('without queue names: every queue under the prefix, found again at each scrape; SIGINT exits 0', async () => {
    const prefix = uniqueQueue('px');
    const a = new Queue('alpha', { connection: server().url, prefix });
    const b = new Queue('beta', { connection: server().url, prefix });
    try {
      await a.add('x', {});
      const exporter = start(['--prefix', prefix, '--json', 'exporter', '-p', '0']);
      try {
        const url = await started(exporter);
        const first = samples(await (await fetch(url)).text());
        expect(first.get('glidemq_job_count{queue="alpha",state="waiting"}')).to.equal(1);
        expect([...first.keys()].some((k) => k.includes('queue="beta"'))).to.equal(false);
        await b.add('y', {});
        await b.add('y', {});
        const second = samples(await (await fetch(url)).text());
        expect(second.get('glidemq_job_count{queue="beta",state="waiting"}')).to.equal(2);
        expect(second.get('glidemq_workers{queue="alpha"}')).to.equal(0);
      } finally {
        const r = await exporter.stop('SIGINT');
        expect(r.code, r.stderr).to.equal(0);
      }
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('the text line without --json names where it listens; a named queue never used is warned about', async () => {
    await q.add('a', {});
    const ghost = uniqueQueue('ghost');
    const exporter = start(['exporter', '--port', '0', name, ghost]);
    try {
      const line = (await waitFor(() => exporter.stdout().split('\n').find((l) => l.startsWith('serving')), 'the start line')) as string;
      expect(line).to.match(new RegExp(`^serving 2 queues of prefix "glide" at redis://127\\.0\\.0\\.1:\\d+ on http://127\\.0\\.0\\.1:\\d+/metrics$`));
      const m = samples(await (await fetch(line.split(' on ')[1])).text());
      expect(m.get(`glidemq_job_count{queue="${ghost}",state="waiting"}`)).to.equal(0);
      expect(await q.client.keys(`glide:{${ghost}}:*`), 'a scrape writes nothing').to.deep.equal([]);
    } finally {
      const r = await exporter.stop();
      expect(r.code).to.equal(0);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.match(new RegExp(`queue "${ghost}" does not exist`));
    }
  });

  it('queue.exportPrometheusMetrics(globalVariables): BullMQ\'s method, every sample labelled', async () => {
    await q.add('a', {});
    const text = await q.exportPrometheusMetrics({ env: 'prod', note: 'say "hi"\\now' });
    expect(text).to.include('# HELP glidemq_job_count Number of jobs in the queue by state');
    expect(text).to.include(`glidemq_job_count{queue="${name}",state="waiting",env="prod",note="say \\"hi\\"\\\\now"} 1`);
    for (const line of text.trim().split('\n')) if (!line.startsWith('#')) expect(line).to.include('env="prod"');
    await expectRejected(q.exportPrometheusMetrics({ 'bad-name': 'x' }), /not a Prometheus label name/);
    await expectRejected(q.exportPrometheusMetrics({ queue: 'x' }), /set by the metrics themselves/);
    // a queue name with characters the format escapes
    const odd = renderPrometheus([{ queue: 'a"b\\c', counts: { waiting: 0, active: 0, delayed: 0, prioritized: 0, completed: 0, failed: 0, paused: 0 }, paused: false, completed: 0, failed: 0, processingMs: 0, oldestWaitingMs: null, workers: 0 }]);
    expect(odd).to.include('glidemq_workers{queue="a\\"b\\\\c"} 0');
  });

  it('bad flags, a port in use and no server: one line on stderr, exit 2', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    const busyPort = (busy.address() as { port: number }).port;
    const noServer = await freePort();
    try {
      const cases: [string[], RegExp][] = [
        [['exporter'], /required option '-p, --port <port>' not specified/],
        [['exporter', '--port', 'x'], /--port must be a whole number from 0 to 65535/],
        [['exporter', '--port', '70000'], /--port must be a whole number/],
        [['exporter', '--port', '0', 'bad{name'], /invalid queue name/],
        [['exporter', '--port', String(busyPort)], /EADDRINUSE/],
        [['exporter', '--port', '0', '--down-status', '404'], /--down-status must be 503 or 200/],
        [['exporter', '--port', '0', '--audit', '10ms'], /--audit: the interval must be at least 1s/],
        [['-u', `redis://127.0.0.1:${noServer}`, 'exporter', '--port', '0'], /cannot reach/],
      ];
      await inParallel(cases, async ([args, message]) => {
        const r = args[0] === '-u' ? await runCli(args) : await cli(args);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
        expect(r.stderr, args.join(' ')).to.match(message);
        expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1);
      });
    } finally {
      busy.close();
    }
  });
});

describe('CLI: exporter --audit and a server that goes away', function () {
  this.timeout(30000);

  it('--audit publishes glidemq_durable_writes; with --down-status 200 a scrape of a stopped server says why, glidemq_up 0, the error counted', async () => {
    const own = await new TestServer().start();
    const q = new Queue(uniqueQueue('gone'), { connection: own.url });
    let exporter: RunningCli | undefined;
    try {
      await q.add('a', {});
      exporter = startCli(['-u', own.url, '--json', 'exporter', '--port', '0', '--audit', '--down-status', '200', q.name]);
      const url = await started(exporter);
      const up = (await waitFor(async () => {
        const text = await (await fetch(url)).text();
        return text.includes('glidemq_durable_writes{') ? text : undefined;
      }, 'the first audit')) as string;
      const m = samples(up);
      expect(m.get('glidemq_up')).to.equal(1);
      expect(m.get(`glidemq_jobs_completed_total{queue="${q.name}"}`)).to.equal(0);
      expect([...m.keys()].filter((k) => k.startsWith('glidemq_durable_writes{node="127.0.0.1:'))).to.have.length(1);
      await q.close();
      await own.stop();
      const res = await fetch(url);
      expect(res.status).to.equal(200);
      const text = await res.text();
      expect(text.split('\n')[0]).to.match(new RegExp(`^# glidemq exporter: cannot reach redis://127\\.0\\.0\\.1:${own.port}: `));
      const down = samples(text);
      expect(down.get('glidemq_up')).to.equal(0);
      expect(down.get('glidemq_scrape_errors_total')).to.equal(1);
    } finally {
      await q.close();
      await own.stop();
      const r = await exporter?.stop('SIGTERM');
      expect(r?.code, r?.stderr).to.equal(0);
      expect(r?.stderr).to.match(/a scrape failed: cannot reach/);
    }
  });
});

async function expectRejected(p: Promise<unknown>, message: RegExp): Promise<void> {
  try {
    await p;
  } catch (err) {
    expect((err as Error).message).to.match(message);
    return;
  }
  throw new Error('expected a rejection');
}
