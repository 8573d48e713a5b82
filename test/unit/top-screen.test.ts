import { expect } from 'chai';
import { formatCount, formatRate } from '../../src/cli/output.js';
import {
  frameBytes,
  HISTORY_SAMPLES,
  type QueueRow,
  recordRates,
  renderScreen,
  renderTable,
  type TopHistory,
  type TopSnapshot,
} from '../../src/cli/top-screen.js';
import { counterGrowth } from '../../src/engine/operating/queue-set.js';

const SGR = /\u001b\[[0-9;]*m/g;
const plain = (lines: string[]) => lines.map((l) => l.replace(SGR, ''));
const columns = (l: string) => Array.from(l).length;
const SPARK = /[▁▂▃▄▅▆▇█]/;

function row(name: string, over: Partial<QueueRow> = {}): QueueRow {
  return {
    name,
    waiting: 120,
    active: 4,
    delayed: 7,
    prioritized: 0,
    completed: 5321,
    failed: 3,
    paused: false,
    oldestWaitingMs: 65_000,
    workers: 2,
    completedPerSec: 12.5,
    failedPerSec: 0.4,
    ...over,
  };
}

function snapshot(queues: QueueRow[], over: Partial<TopSnapshot> = {}): TopSnapshot {
  return { where: 'redis://127.0.0.1:6379', prefix: 'glide', at: Date.UTC(2026, 0, 2, 3, 4, 5), intervalMs: 1000, queues, ...over };
}

function fullHistory(queues: QueueRow[]): TopHistory {
  const h: TopHistory = new Map();
  for (let i = 0; i < HISTORY_SAMPLES; i++) {
    recordRates(
      h,
      queues.map((q) => ({ ...q, completedPerSec: i % 7, failedPerSec: i % 3 })),
    );
  }
  return h;
}

/** Every line of a render within the size, whatever it holds. */
function expectFits(lines: string[], width: number, height: number): void {
  expect(lines.length, lines.join('\n')).to.be.at.most(height);
  for (const l of plain(lines)) expect(columns(l), l).to.be.at.most(width);
}

describe('glidemq top: the screen', () => {
  const queues = ['emails', 'reports', 'thumbnails', 'webhooks'].map((n) => row(n));
  const history = fullHistory(queues);

  it('at 80x24: title, totals, a header and a row per queue with a sparkline, and the keys', () => {
    const lines = renderScreen(snapshot(queues), history, { width: 80, height: 24 });
    expectFits(lines, 80, 24);
    const text = plain(lines);
    expect(text[0]).to.match(/^glidemq top · redis:\/\/127\.0\.0\.1:6379 · prefix glide/);
    expect(text[1]).to.include('4 queues').and.include('480 waiting').and.include('50 done/s').and.include('1.6 fail/s');
    const header = text.find((l) => l.startsWith('queue'))!;
    for (const h of ['waiting', 'active', 'failed', 'done/s', 'workers', 'oldest']) expect(header, h).to.include(h);
    for (const q of queues) {
      const line = text.find((l) => l.startsWith(`${q.name} `))!;
      expect(line, q.name).to.match(SPARK);
      expect(line).to.match(/ 120 .* 13 /).and.include('1m 05s');
    }
    expect(text[text.length - 1]).to.include('q quit');
  });

  it('at 120x40: every column, and wider sparklines than at 80', () => {
    const wide = plain(renderScreen(snapshot(queues), history, { width: 120, height: 40 }));
    const narrow = plain(renderScreen(snapshot(queues), history, { width: 80, height: 24 }));
    expectFits(wide, 120, 40);
    const header = wide.find((l) => l.startsWith('queue'))!;
    for (const h of ['waiting', 'active', 'delayed', 'prio', 'failed', 'oldest', 'workers', 'done/s', 'fail/s', 'completed']) expect(header, h).to.include(h);
    const sparks = (lines: string[]) => (lines.find((l) => l.startsWith('emails'))!.match(/[▁▂▃▄▅▆▇█]+/g) ?? []).map((s) => s.length);
    expect(sparks(wide)).to.have.length(2); // completed and failed
    expect(Math.max(...sparks(wide))).to.be.greaterThan(Math.max(...sparks(narrow)));
    expect(Math.max(...sparks(wide))).to.be.at.most(HISTORY_SAMPLES);
  });

  it('more queues than rows: as many as fit, then "+N more queues", in exactly the height', () => {
    const many = Array.from({ length: 50 }, (_, i) => row(`queue-${String(i).padStart(2, '0')}`));
    const lines = plain(renderScreen(snapshot(many), fullHistory(many), { width: 80, height: 24 }));
    expectFits(lines, 80, 24);
    expect(lines).to.have.length(24);
    const shown = lines.filter((l) => /^queue-\d\d /.test(l));
    const more = lines.find((l) => l.startsWith('+'))!;
    expect(more).to.match(/^\+(\d+) more queues/);
    expect(shown.length + Number(/^\+(\d+)/.exec(more)![1])).to.equal(50);
    expect(lines[lines.length - 1]).to.include('q quit');
    // The same at 120x40: more rows
    const tall = plain(renderScreen(snapshot(many), fullHistory(many), { width: 120, height: 40 }));
    expectFits(tall, 120, 40);
    expect(tall.filter((l) => /^queue-\d\d /.test(l)).length).to.be.greaterThan(shown.length);
  });

  it('as many queues as rows: all shown; one more: the last row says "+2 more queues"', () => {
    const fit = Array.from({ length: 19 }, (_, i) => row(`q${i}`));
    const all = plain(renderScreen(snapshot(fit), new Map(), { width: 80, height: 24 }));
    expect(all).to.have.length(24);
    expect(all.filter((l) => /^q\d+ /.test(l))).to.have.length(19);
    const over = plain(renderScreen(snapshot([...fit, row('q19')]), new Map(), { width: 80, height: 24 }));
    expect(over).to.have.length(24);
    expect(over.filter((l) => /^q\d+ /.test(l))).to.have.length(18);
    expect(over).to.include.members(['+2 more queues (a taller terminal shows more; or name the queues)']);
  });

  it('long names are cut with …, paused queues are marked, unknown numbers are -', () => {
    const qs = [
      row('a-very-long-queue-name-that-goes-on-and-on-and-on-forever'),
      row('held', { paused: true }),
      row('fresh', { workers: null, oldestWaitingMs: null, completedPerSec: null, failedPerSec: null }),
    ];
    const lines = plain(renderScreen(snapshot(qs), new Map(), { width: 80, height: 24 }));
    expectFits(lines, 80, 24);
    expect(lines.some((l) => /^a-very-long\S*… /.test(l))).to.equal(true);
    expect(lines.find((l) => l.startsWith('held'))).to.include('held (paused)');
    const narrow = plain(renderScreen(snapshot([row('held-for-now', { paused: true })]), new Map(), { width: 12, height: 24 }));
    expect(narrow.find((l) => l.startsWith('held'))).to.match(/^held-for-… P$/); // no room for the long mark
    const fresh = lines.find((l) => l.startsWith('fresh'))!;
    expect(fresh.split(/\s+/).filter((c) => c === '-').length).to.be.at.least(3);
    expect(lines[1]).to.include('workers -');
  });

  it('never wider or taller than the terminal, down to tiny sizes', () => {
    const many = Array.from({ length: 12 }, (_, i) => row(`queue-number-${i}`, { waiting: 10 ** (i % 9), paused: i % 4 === 0 }));
    const h = fullHistory(many);
    for (const [w, ht] of [
      [80, 24],
      [120, 40],
      [60, 10],
      [40, 8],
      [20, 5],
      [10, 3],
      [1, 1],
      [200, 60],
    ]) {
      expectFits(renderScreen(snapshot(many), h, { width: w, height: ht }), w, ht);
      expectFits(renderScreen(snapshot(many, { problem: 'cannot reach redis://127.0.0.1:6379: connection refused' }), h, { width: w, height: ht }), w, ht);
    }
  });

  it('no queues yet, and a failed refresh, are said', () => {
    const empty = plain(renderScreen(snapshot([]), new Map(), { width: 80, height: 24 }));
    expect(empty.join('\n')).to.include('no queues under prefix "glide" yet');
    const broken = plain(renderScreen(snapshot(queues, { problem: 'cannot reach the server' }), history, { width: 80, height: 24 }));
    expect(broken[broken.length - 1]).to.match(/^cannot reach the server · q quit/);
  });

  it('the one-shot table: every queue, no sparklines, fits 80 columns', () => {
    const many = Array.from({ length: 40 }, (_, i) => row(`queue-${i}`));
    const lines = plain(renderTable(snapshot(many), 80));
    expect(lines).to.have.length(41);
    for (const l of lines) {
      expect(columns(l), l).to.be.at.most(80);
      expect(l).to.not.match(SPARK);
    }
    expect(lines[0]).to.match(/^queue\s+waiting\s+active/);
  });
});

describe('glidemq top: rates and history', () => {
  const m = (pairs: [number, number][]) => new Map(pairs);

  it('counterGrowth: within a minute, and across a minute boundary', () => {
    expect(counterGrowth(m([[0, 5], [60_000, 10]]), m([[0, 5], [60_000, 14]]))).to.equal(4);
    // the second read no longer has minute 0, and has a new minute 120000
    expect(counterGrowth(m([[0, 5], [60_000, 10]]), m([[60_000, 12], [120_000, 3]]))).to.equal(5);
    expect(counterGrowth(m([[60_000, 10]]), m([[0, 99], [60_000, 10], [120_000, 0]]))).to.equal(0); // minutes before the first read do not count
    expect(counterGrowth(m([]), m([[0, 3]]))).to.equal(0);
  });

  it('recordRates keeps the last samples per queue and forgets queues gone', () => {
    const h: TopHistory = new Map();
    for (let i = 0; i < 40; i++) recordRates(h, [row('a', { completedPerSec: i, failedPerSec: 0 }), row('b')]);
    expect(h.get('a')!.completed).to.have.length(HISTORY_SAMPLES);
    expect(h.get('a')!.completed.at(-1)).to.equal(39);
    recordRates(h, [row('a', { completedPerSec: null, failedPerSec: null })]);
    expect([...h.keys()]).to.deep.equal(['a']);
    expect(h.get('a')!.completed.at(-1)).to.equal(39); // an unknown rate adds no sample
  });

  it('formatRate and formatCount stay narrow', () => {
    expect([null, 0, 0.04, 0.4, 9.94, 12.4, 999, 123_456].map(formatRate)).to.deep.equal(['-', '0', '0.0', '0.4', '9.9', '12', '999', '123k']);
    expect([0, 99_999, 123_456, 1_234_567, 45_000_000_000].map(formatCount)).to.deep.equal(['0', '99999', '123k', '1.2M', '45G']);
  });
});

describe('glidemq top: drawing', () => {
  it('writes each line at its row, clears short lines and the rows below, never clears the screen', () => {
    const bytes = frameBytes(['abc', 'x'.repeat(10)], { width: 10, height: 4 });
    expect(bytes).to.equal('\u001b[1;1Habc\u001b[K\u001b[2;1H' + 'x'.repeat(10) + '\u001b[3;1H\u001b[J');
    expect(bytes).to.not.include('\u001b[2J');
  });
});
