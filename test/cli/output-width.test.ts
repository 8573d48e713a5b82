/**
 * The widest outputs (audit, schedulers, metrics, job, queues, stats, jobs) fit the width they are
 * given: with stdout not a terminal, $COLUMNS (80 and 120 here); in a pseudo-terminal, its own
 * width; no line is wider, and the wider width is used.
 */
import { expect } from 'chai';
import { formatClock, formatDuration, formatRelative, formatTime, sameDay, timeZoneLabel, useUtcTimes, wrapText } from '../../src/cli/output.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { GLIDEMQ_BIN, NO_PROFILE, runCli } from '../helpers/cli.js';
import { inParallel } from '../helpers/parallel.js';
import { runInPty } from '../helpers/pty.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { join } from 'node:path';
import { REPO_ROOT, valkeyFixture } from '../helpers/fixtures.js';
import { useServer, waitFor } from '../helpers/valkey.js';

const WIDTHS = [80, 120];

/** The lines wider than `columns` (counted in characters, as a terminal shows them). */
function tooWide(text: string, columns: number): string[] {
  return text.split('\n').filter((l) => [...l].length > columns);
}

const widest = (text: string) => Math.max(...text.split('\n').map((l) => [...l].length));

describe('CLI output fits the terminal width', function () {
  this.timeout(60000);
  // a config that fails and warns: audit prints advice under those checks
  const server = useServer({ include: valkeyFixture('aof-no') });
  const h = new Harness(server);
  let queue: string;
  let failedId: string;
  let bigId: string;

  before(async () => {
    queue = uniqueQueue('cli-width-with-a-rather-long-queue-name');
    const q: Queue = h.queue(queue);
    await q.upsertScheduler('nightly-report-for-the-finance-team', { pattern: '30 2 * * MON-FRI', tz: 'America/Argentina/Buenos_Aires' }, { name: 'finance-report', data: {} });
    await q.upsertScheduler('heartbeat', { every: 90_000 }, { name: 'heartbeat', data: {} });
    const w = h.worker(queue, async (job) => {
      if (job.data.fail) throw new Error(`the upstream service answered 503 for ${'a very long reason '.repeat(8)}`);
      return { ok: true, echoed: job.data };
    });
    const failed = await q.add('fails', { fail: true }, { attempts: 1 });
    await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'works', data: { i, words: 'some data with spaces '.repeat(20) } })));
    failedId = failed.id;
    await waitFor(() => w.finished.completed + w.finished.failed === 6, 'six jobs to finish');
    await h.cleanup();
    const big = await h.queue(queue).add('big', { blob: 'x'.repeat(400), text: 'word '.repeat(60) }, { delay: 3_600_000, priority: 3 });
    bigId = big.id;
  });
  after(() => h.cleanup());

  const commands = (): [string, string[], number][] => [
    ['audit', ['audit'], 1],
    ['schedulers', ['schedulers', queue], 0],
    ['metrics', ['metrics', queue], 0],
    ['metrics --table', ['metrics', queue, '--table', '--minutes', '5'], 0],
    ['metrics over a day', ['metrics', queue, '--minutes', '1440'], 0],
    ['job (failed)', ['job', queue, failedId], 0],
    ['job (big, delayed)', ['job', queue, bigId], 0],
  ];

  for (const columns of WIDTHS) {
    it(`at ${columns} columns no line is wider`, async () => {
      const runs = commands().flatMap((command) => [false, true].map((utc) => ({ command, utc })));
      await inParallel(runs, async ({ command: [what, args, code], utc }) => {
        const r = await runCli([...args, '-u', server().url, ...(utc ? ['--utc'] : [])], { env: { COLUMNS: String(columns) } });
        expect(r.code, `${what}: ${r.stderr}`).to.equal(code);
        expect(r.stdout, what).to.not.equal('');
        expect(tooWide(r.stdout, columns), `${what}${utc ? ' --utc' : ''} at ${columns}`).to.deep.equal([]);
      });
    });
  }

  // On a real terminal (a pty whose size stty sets): the terminal's own width, with colour on
  it('in a terminal of 80 and of 120 columns no line is wider (colour codes not counted)', async () => {
    const more: [string, string[], number][] = [
      ['queues', ['queues'], 0],
      ['stats', ['stats', queue], 0],
      ['jobs', ['jobs', queue, '--state', 'completed'], 0],
    ];
    const runs = WIDTHS.flatMap((columns) => [...commands(), ...more].map((command) => ({ columns, command })));
    await inParallel(runs, async ({ columns, command: [what, args, code] }) => {
      const cli = [process.execPath, GLIDEMQ_BIN, ...args, '-u', server().url].map((a) => `'${a}'`).join(' ');
      const r = await runInPty(['sh', '-c', `stty cols ${columns} rows 40; ${cli}`], 'no such prompt: never typed', '', { COLUMNS: undefined, NO_COLOR: undefined, ...NO_PROFILE });
      expect(r.code, `${what}: ${r.output}`).to.equal(code);
      const shown = r.output.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r/g, '');
      expect(shown.trim(), what).to.not.equal('');
      expect(tooWide(shown, columns), `${what} in a terminal of ${columns}`).to.deep.equal([]);
    });
  });

  it('uses the room it has: at 120 columns audit advice and the sparklines are wider than at 80', async () => {
    for (const args of [['audit'], ['metrics', queue]]) {
      const narrow = await runCli([...args, '-u', server().url], { env: { COLUMNS: '80' } });
      const wide = await runCli([...args, '-u', server().url], { env: { COLUMNS: '120' } });
      expect(widest(wide.stdout), args[0]).to.be.greaterThan(widest(narrow.stdout));
      expect(widest(wide.stdout), args[0]).to.be.greaterThan(80);
    }
  });

  it("the dry runs of retry and promote, the worker's start line and queue names fit 80 (a name never broken)", async () => {
    const other = uniqueQueue('cli-width-promote-with-a-long-name');
    const q = h.queue(other);
    const ids = Array.from({ length: 12 }, (_, i) => `order-2026-12-06-${i}-7f3c2a9e-5b1d-4c8e-9a6f`);
    await q.addBulk(ids.map((jobId) => ({ name: 'later', data: {}, opts: { jobId, delay: 3_600_000 } })));
    const worked = uniqueQueue('cli-width-worker-with-a-long-queue-name');
    await h.queue(worked).add('once', {});
    const runs: [string, Promise<{ stdout: string; stderr: string }>][] = [
      ['promote --all --dry-run', runCli(['promote', other, '--all', '--dry-run', '-u', server().url])],
      ['retry --all-failed --dry-run', runCli(['retry', queue, '--all-failed', '--dry-run', '-u', server().url])],
      ['queues', runCli(['queues', '-u', server().url], { env: { COLUMNS: '80' } })],
      ['worker', runCli(['worker', join(REPO_ROOT, 'fixtures', 'processors', 'echo.mjs'), '-q', worked, '--max-jobs', '1', '-u', server().url])],
    ];
    for (const [what, run] of runs) {
      const r = await run;
      expect(tooWide(r.stdout + r.stderr, 80), what).to.deep.equal([]);
      if (what === 'queues') for (const name of [queue, other]) expect(r.stdout.split('\n').some((l) => l.includes(name)), `${name} whole in\n${r.stdout}`).to.equal(true);
    }
    const promoted = (await runs[0][1]).stdout.replace(/\n {2}/g, ' ');
    expect(promoted).to.match(/would promote 12 delayed jobs \(order-2026-12-06-\d+-7f3c2a9e-5b1d-4c8e-9a6f, .*, … 2 more \(--json lists them all\)\)\n$/);
  });

  it('without $COLUMNS, piped output fits 80', async () => {
    await inParallel(commands(), async ([what, args]) => {
      const r = await runCli([...args, '-u', server().url]);
      expect(tooWide(r.stdout, 80), what).to.deep.equal([]);
    });
  });

  it('audit: one line per check, problems first with advice beneath, the verdict last', async () => {
    const r = await runCli(['audit', '-u', server().url], { env: { COLUMNS: '80' } });
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).to.equal(`127.0.0.1:${server().port} (master)`);
    const checks = lines.filter((l) => /^ {2}(pass|warn|fail|unknown) /.test(l));
    const statuses = checks.map((l) => l.trim().split(/\s+/)[0]);
    const rank = { fail: 0, warn: 1, unknown: 2, pass: 3 } as Record<string, number>;
    expect(statuses.map((s) => rank[s])).to.deep.equal([...statuses.map((s) => rank[s])].sort((a, b) => a - b));
    expect(statuses[0]).to.equal('fail');
    // advice (indented under the check column) follows failing and warning checks only
    lines.forEach((line, i) => {
      if (!/^ {11}\S/.test(line)) return;
      let j = i - 1;
      while (/^ {11}\S/.test(lines[j])) j -= 1;
      expect(lines[j], `advice "${line}"`).to.match(/^ {2}(fail|warn) /);
    });
    expect(lines.some((l) => /^ {11}\S/.test(l))).to.equal(true);
    expect(lines[lines.length - 1]).to.match(/^1 node: \d+ pass, \d+ warn, \d+ fail, \d+ unknown — below the durable baseline$/);
    // the JSON is unchanged by the layout
    const doc = JSON.parse((await runCli(['audit', '-u', server().url, '--json'], { env: { COLUMNS: '80' } })).stdout);
    expect(doc.nodes[0].checks.length).to.equal(checks.length);
  });

  it('job: the failure stack is shown, bounded', async () => {
    const r = await runCli(['job', queue, failedId, '-u', server().url], { env: { COLUMNS: '80' } });
    expect(r.code, r.stderr).to.equal(0);
    const doc = JSON.parse((await runCli(['job', queue, failedId, '-u', server().url, '--json'])).stdout) as { stacktrace?: string[] };
    expect(doc.stacktrace, 'a failed attempt keeps its stack').to.be.an('array').that.is.not.empty;
    const lines = r.stdout.split('\n');
    const at = lines.indexOf('stack (last failed attempt):');
    expect(at, r.stdout).to.be.greaterThan(0);
    expect(lines[at + 1]).to.match(/^ {2}Error: the upstream service answered 503/);
    expect(lines[at + 2]).to.match(/^ {4}at /);
    const stackLines = lines.slice(at + 1).filter((l) => /^ {2}/.test(l));
    expect(stackLines.length).to.be.at.most(13);
  });
});

describe('output.ts: one duration style, one time style, wrapping', () => {
  after(() => useUtcTimes(false));

  it('formatDuration: ms, tenths of seconds, then the two largest units', () => {
    const cases: [number, string][] = [
      [0, '0ms'],
      [850, '850ms'],
      [999.4, '999ms'],
      [999.6, '1s'],
      [1500, '1.5s'],
      [12_000, '12s'],
      [59_940, '59.9s'],
      [59_960, '1m'],
      [245_000, '4m 05s'],
      [300_000, '5m'],
      [7_800_000, '2h 10m'],
      [7_200_000, '2h'],
      [273_600_000, '3d 04h'],
      [-90_000, '-1m 30s'],
    ];
    expect(cases.map(([ms]) => formatDuration(ms))).to.deep.equal(cases.map(([, s]) => s));
    expect(formatRelative(300_000)).to.equal('in 5m');
    expect(formatRelative(-1500)).to.equal('1.5s ago');
  });

  it('formatTime: local with the zone, or ISO UTC; nothing for no time', () => {
    const t = Date.UTC(2026, 11, 4, 13, 3, 7, 450);
    useUtcTimes(false);
    expect(formatTime(t)).to.match(/^2026-12-0[45] \d\d:\d3:07 [+-]\d\d:\d\d$/);
    expect(formatTime(0)).to.equal('');
    expect(formatTime(null)).to.equal('');
    useUtcTimes(true);
    expect(formatTime(t)).to.equal('2026-12-04T13:03:07Z');
    expect(formatClock(t)).to.equal('13:03');
    expect(formatClock(t, true)).to.equal('2026-12-04 13:03');
    expect(timeZoneLabel(t)).to.equal('UTC');
    expect(sameDay(t, t + 10 * 3_600_000)).to.equal(true);
    expect(sameDay(t, t + 11 * 3_600_000)).to.equal(false);
  });

  it('wrapText: between words, and a word longer than the line in pieces', () => {
    expect(wrapText('the quick brown fox', 10)).to.deep.equal(['the quick', 'brown fox']);
    expect(wrapText('abcdefghijklmnop xy', 6)).to.deep.equal(['abcdef', 'ghijkl', 'mnop', 'xy']);
    expect(wrapText('one\ntwo', 80)).to.deep.equal(['one', 'two']);
    for (const l of wrapText('word '.repeat(50) + 'x'.repeat(100), 17)) expect(l.length).to.be.at.most(17);
  });
});
