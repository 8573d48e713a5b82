import { expect } from 'chai';
import { GLIDEMQ_BIN, runCli } from '../helpers/cli.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { runInPty } from '../helpers/pty.js';
import { useServer, waitFor } from '../helpers/valkey.js';

const ENTER_ALT = '\u001b[?1049h';
const LEAVE_ALT = '\u001b[?1049l';

interface Screen {
  /** The alternate screen's rows as they were when the program left it. */
  rows: string[];
  /** A character was written past the last column (a line too wide: the terminal would wrap it). */
  overflowed: boolean;
}

/**
 * What a terminal of `cols` x `height` showed on its alternate screen just before the program left
 * it: the output replayed through the few control sequences top uses (cursor moves, line and
 * screen clears; colours ignored).
 */
function altScreenAtExit(output: string, cols: number, height: number): Screen {
  const blank = () => Array.from({ length: height }, () => Array<string>(cols).fill(' '));
  let screen = blank();
  let alt = false;
  let r = 0;
  let c = 0;
  let overflowed = false;
  let last: string[] = [];
  const token = /\u001b\[\?(\d+)([hl])|\u001b\[(\d*)(?:;(\d*))?([HJK])|\u001b\[[0-9;]*[A-Za-z]|\r|\n|[^\u001b\r\n]/gu;
  for (const m of output.matchAll(token)) {
    const [t, priv, onOff, p1, p2, op] = m;
    if (priv === '1049') {
      alt = onOff === 'h';
      if (alt) screen = blank();
      else last = screen.map((row) => row.join('').trimEnd());
    } else if (!alt) {
      continue;
    } else if (op === 'H') {
      r = Math.max(0, Number(p1 || 1) - 1);
      c = Math.max(0, Number(p2 || 1) - 1);
    } else if (op === 'K') {
      for (let x = c; x < cols; x++) screen[r][x] = ' ';
    } else if (op === 'J') {
      if (p1 === '2') screen = blank();
      else for (let y = r; y < height; y++) for (let x = y === r ? c : 0; x < cols; x++) screen[y][x] = ' ';
    } else if (t === '\r') {
      c = 0;
    } else if (t === '\n') {
      r = Math.min(height - 1, r + 1);
    } else if (!t.startsWith('\u001b')) {
      if (c >= cols || r >= height) overflowed = true;
      else screen[r][c++] = t;
    }
  }
  return { rows: last, overflowed };
}

/** The cell under a right-aligned column head in a row of the screen. */
function cellUnder(header: string, row: string, head: string): string {
  const at = header.search(new RegExp(`(?<=^|\\s)${head.replace('/', '\\/')}(?=\\s|$)`));
  expect(at, `column ${head} in: ${header}`).to.be.at.least(0);
  return row
    .slice(0, at + head.length)
    .trimEnd()
    .split(/\s+/)
    .pop()!;
}

describe('glidemq top (CLI)', function () {
  this.timeout(60000);
  const server = useServer();
  const h = new Harness(server);
  let idle: string;
  let busy: string;
  let release: () => void;

  before(async () => {
    idle = uniqueQueue('idle');
    busy = uniqueQueue('busy');
    const iq = h.queue(idle);
    for (let i = 0; i < 5; i++) await iq.add('wait', { i });
    const gate = new Promise<void>((r) => (release = r));
    const bq = h.queue(busy);
    const w = h.worker(busy, async (job) => {
      if (job.data.fail) throw new Error('boom');
      if (job.data.hold) await gate;
      return 'ok';
    }, { concurrency: 2 });
    await bq.addBulk([
      { name: 'a', data: {} },
      { name: 'b', data: {} },
      { name: 'c', data: {} },
      { name: 'f', data: { fail: true } },
    ]);
    await waitFor(() => w.finished.completed === 3 && w.finished.failed === 1, 'three jobs completed and one failed');
    await bq.add('hold', { hold: true });
    await waitFor(async () => (await bq.getJobCounts()).active === 1, 'the held job to be active');
    await waitFor(async () => (await bq.getWorkers()).length === 1, 'the worker in the registry');
  });

  after(async () => {
    release?.();
    await h.cleanup();
  });

  /** `glidemq top` in a pty of cols x rows; `answer` typed once `prompt` shows; then the terminal's mode after it exits. */
  async function topInPty(cols: number, rows: number, prompt: string, answer: string, args: string[] = []) {
    const cmd = `stty cols ${cols} rows ${rows}; "${process.execPath}" "${GLIDEMQ_BIN}" -u ${server().url} top ${args.join(' ')}; rc=$?; echo; echo "stty: $(stty -a | tr ' ' '\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' ')"; exit $rc`;
    return runInPty(['sh', '-c', cmd], prompt, answer);
  }

  function expectRestored(output: string, code: number | null): void {
    expect(code, output).to.equal(0);
    expect(output).to.include(ENTER_ALT);
    // Left the alternate screen, cursor shown, after the last frame
    const left = output.lastIndexOf(LEAVE_ALT);
    expect(left).to.be.greaterThan(output.lastIndexOf(ENTER_ALT));
    expect(output.lastIndexOf('\u001b[?25h')).to.be.greaterThan(output.lastIndexOf('\u001b[?25l'));
    // Keys echoed and line-buffered again
    expect(output).to.match(/stty: icanon echo /);
  }

  it('live at 80x24: the queues with their counts, a sparkline once it refreshed, q quits and restores the terminal', async () => {
    // ▁: a sparkline, drawn from the second refresh on (the first has no rate yet)
    const { code, output } = await topInPty(80, 24, '▁', 'q');
    expectRestored(output, code);
    const screen = altScreenAtExit(output, 80, 24);
    expect(screen.overflowed, screen.rows.join('\n')).to.equal(false);
    const text = screen.rows.join('\n');
    expect(screen.rows[0]).to.match(/^glidemq top · redis:\/\/127\.0\.0\.1:\d+ · prefix glide/);
    expect(screen.rows[1]).to.match(/^2 queues · 5 waiting · 1 active · 1 failed · 0 done\/s · 0 fail\/s · 1 worker/);
    const header = screen.rows.find((l) => l.startsWith('queue'))!;
    expect(header, text).to.match(/^queue\s+waiting\s+active\s+delayed\s+failed\s+oldest\s+workers\s+done\/s/);
    const idleRow = screen.rows.find((l) => l.startsWith(idle))!;
    const busyRow = screen.rows.find((l) => l.startsWith(busy))!;
    expect(idleRow, text).to.be.a('string');
    expect(busyRow, text).to.be.a('string');
    expect(cellUnder(header, idleRow, 'waiting')).to.equal('5');
    expect(cellUnder(header, idleRow, 'workers')).to.equal('0');
    expect(cellUnder(header, idleRow, 'oldest')).to.match(/^\d+(\.\d)?s$/);
    expect(cellUnder(header, busyRow, 'active')).to.equal('1');
    expect(cellUnder(header, busyRow, 'failed')).to.equal('1');
    expect(cellUnder(header, busyRow, 'workers')).to.equal('1');
    expect(cellUnder(header, busyRow, 'oldest')).to.equal('-');
    expect(busyRow).to.match(/▁+/);
    expect(screen.rows.find((l) => l.startsWith('q quit'))).to.include('refresh every 1s');
    // Redrawn in place: the screen is cleared once, on entry, never per frame
    expect(output.split('\u001b[2J')).to.have.length(2);
  });

  it('live at 120x40 shows every column; Ctrl-C quits as q does', async () => {
    const { code, output } = await topInPty(120, 40, '▁', '\u0003');
    expectRestored(output, code);
    const screen = altScreenAtExit(output, 120, 40);
    expect(screen.overflowed).to.equal(false);
    const header = screen.rows.find((l) => l.startsWith('queue'))!;
    for (const h of ['waiting', 'active', 'delayed', 'prio', 'failed', 'oldest', 'workers', 'done/s', 'fail/s', 'completed']) expect(header, h).to.include(h);
    const busyRow = screen.rows.find((l) => l.startsWith(busy))!;
    expect(cellUnder(header, busyRow, 'completed')).to.equal('3');
  });

  it('named queues only, in their order, and "+N more" on a terminal too short for them', async () => {
    const ghost = uniqueQueue('ghost');
    const { code, output } = await topInPty(80, 5, '▁', 'q', [idle, busy, ghost]);
    expectRestored(output, code);
    const screen = altScreenAtExit(output, 80, 5);
    expect(screen.overflowed).to.equal(false);
    expect(screen.rows[1]).to.match(/^3 queues · 5 waiting · 1 active/);
    expect(screen.rows[2]).to.match(/^queue\s+waiting/);
    expect(screen.rows[3]).to.match(new RegExp(`^${idle}\\s+5\\s`));
    expect(screen.rows[4]).to.match(/^\+2 more queues /);
    // The warning about the queue that never existed, on the normal screen once the live view left
    const warning = output.indexOf(`warning: queue "${ghost}" does not exist`);
    expect(warning).to.be.greaterThan(output.lastIndexOf(LEAVE_ALT));
  });

  it('stdout not a terminal: one table, every queue, no control sequences, exit 0', async () => {
    const r = await runCli(['top', '-u', server().url]);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.not.include('\u001b');
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).to.have.length(3);
    for (const l of lines) expect(l.length, l).to.be.at.most(80);
    const [header, ...rows] = lines;
    const idleRow = rows.find((l) => l.startsWith(idle))!;
    const busyRow = rows.find((l) => l.startsWith(busy))!;
    expect(cellUnder(header, idleRow, 'waiting')).to.equal('5');
    expect(cellUnder(header, busyRow, 'active')).to.equal('1');
    expect(cellUnder(header, busyRow, 'failed')).to.equal('1');
    expect(cellUnder(header, busyRow, 'workers')).to.equal('1');
    expect(cellUnder(header, busyRow, 'done/s')).to.equal('0');
  });

  it('--json: one snapshot', async () => {
    const r = await runCli(['top', '--json', '-u', server().url]);
    expect(r.code, r.stderr).to.equal(0);
    const doc = JSON.parse(r.stdout);
    expect(doc).to.include({ prefix: 'glide', intervalMs: 1000 });
    const byName = Object.fromEntries(doc.queues.map((q: { name: string }) => [q.name, q]));
    expect(byName[idle]).to.include({ waiting: 5, active: 0, workers: 0, completedPerSec: 0, failedPerSec: 0 });
    expect(byName[idle].oldestWaitingMs).to.be.a('number').greaterThan(0);
    expect(byName[busy]).to.include({ waiting: 0, active: 1, failed: 1, completed: 3, workers: 1, oldestWaitingMs: null, paused: false });
  });

  it('a queue named that never existed: a warning, zeros, no key left behind; --interval under 1s: exit 2', async () => {
    const ghost = uniqueQueue('ghost');
    const r = await runCli(['top', ghost, '-u', server().url]);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.include(`warning: queue "${ghost}" does not exist`);
    expect(r.stdout).to.match(new RegExp(`^${ghost}\\s+0\\s`, 'm'));
    const admin = h.queue(idle).client;
    expect(await admin.keys(`*${ghost}*`)).to.deep.equal([]);
    const bad = await runCli(['top', '--interval', '500ms', '-u', server().url]);
    expect(bad.code).to.equal(2);
    expect(bad.stderr.trim().split('\n')).to.have.length(1);
    expect(bad.stderr).to.include('--interval must be at least 1s');
  });
});
