/**
 * `glidemq ui` in a real browser (issue 32): the command runs as a child process on a free port,
 * and a headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core, which never
 * downloads a browser of its own) opens the board. One server, one `ui` and one browser for the file.
 *
 * GLIDEMQ_UI_SCREENSHOT=<path>: also writes the board's screenshot there (docs/dashboard.png is one).
 */
import { expect } from 'chai';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { runCli, startCli, type RunningCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';

const CHROMIUM = '/usr/bin/chromium';
const USER = 'ops';
const PASS = 'correct horse';

describe('CLI: ui (the dashboard, in a real browser)', function () {
  this.timeout(60000);
  // a safety net, not a speed check: loading bull-board and express took over 15 s once in a full
  // run on a machine reading its files back from disk (usually ~1 s)
  const START_MS = 40000;
  const server = useServer();
  const prefix = uniqueQueue('ui');
  const dir = mkdtempSync(join(tmpdir(), 'glidemq-ui-test-'));
  let emails: Queue;
  let images: Queue;
  let late: Queue | undefined;
  let ui: RunningCli;
  let url = '';
  let browser: BrowserContext | undefined;
  let launching: Promise<BrowserContext> | undefined;
  let page: Page;
  let badId = '';
  let statsRuns: Promise<Record<string, number>[]> | undefined;

  const cli = (args: string[]) => runCli(['-u', server().url, '--prefix', prefix, ...args]);

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: the browser tests need Debian's Chromium (make test installs it with bin/install-chromium.sh, which runs apt-get install chromium)`);
    }
    launching = chromium.launchPersistentContext(join(dir, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      httpCredentials: { username: USER, password: PASS },
      viewport: { width: 1440, height: 640 },
    });
    launching.catch(() => undefined); // awaited below; a failure is reported there
    emails = new Queue('emails', { connection: server().url, prefix });
    images = new Queue('images', { connection: server().url, prefix });
    const w = new Worker(
      'emails',
      async (job) => {
        await job.log(`sending to ${job.data.to}`);
        if (job.name === 'bad') throw new Error('the mail server refused the message');
        return 'sent';
      },
      { connection: server().url, prefix, blockTimeout: 1000 },
    );
    w.on('error', () => undefined);
    await emails.add('welcome', { to: 'ana@example.com' });
    badId = (await emails.add('bad', { to: 'nobody@example.com' })).id;
    await waitFor(async () => (await emails.getCompletedCount()) === 1 && (await emails.getFailedCount()) === 1, 'the first jobs finished');
    await w.close();
    await emails.add('digest', { to: 'bo@example.com' }, { delay: 600_000 });
    await emails.add('reminder', { to: 'cy@example.com' });
    await images.add('resize', { width: 640 });

    // read while the board and the browser start (nothing changes the queues until the tests do)
    statsRuns = Promise.all(['emails', 'images'].map(async (name) => JSON.parse((await cli(['stats', name, '--json'])).stdout) as Record<string, number>));
    statsRuns.catch(() => undefined); // awaited by the first test
    ui = startCli(['-u', server().url, '--prefix', prefix, '--json', 'ui', '--port', '0', '--auth', `${USER}:${PASS}`, '--rediscover', '200ms']);
    const line = (await waitFor(() => ui.stdout().split('\n').find((l) => l.startsWith('{')), 'the dashboard to listen', START_MS)) as string;
    url = (JSON.parse(line) as { url: string }).url;

    browser = await launching;
    page = await browser.newPage();
  });

  after(async () => {
    // the browser, also when the setup failed after launching it
    await (browser ?? (await launching?.catch(() => undefined)))?.close();
    const r = await ui?.stop('SIGTERM');
    await Promise.all([emails?.close(), images?.close(), late?.close()]);
    if (r) expect(r.code, r.stderr).to.equal(0);
    rmSync(join(dir, 'profile'), { recursive: true, force: true }); // the screenshots stay
  });

  /** The count the board's status tab of `queue` shows (no number: 0). */
  async function shownCount(queue: string, status: string): Promise<number> {
    const text = await page.locator(`a[href="/queue/${queue}?status=${status}"]`).innerText();
    const n = /\d+/.exec(text);
    return n ? Number(n[0]) : 0;
  }

  it('opens the board: every queue of the prefix is listed, with the counts `glidemq stats --json` gives', async () => {
    const [emailStats, imageStats] = await statsRuns!;
    expect(emailStats).to.include({ waiting: 1, delayed: 1, completed: 1, failed: 1 });
    await page.goto(url);
    for (const name of ['emails', 'images']) await page.locator(`a[href="/queue/${name}"]`).first().waitFor();
    for (const [name, stats] of [['images', imageStats], ['emails', emailStats]] as const) {
      await page.locator(`a[href="/queue/${name}"]`).first().click(); // in the page, as a user moves
      await waitFor(async () => (await shownCount(name, 'waiting')) === stats.waiting, `${name}'s counts shown`);
      for (const status of ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused']) {
        expect(await shownCount(name, status), `${name} ${status}`).to.equal(stats[status]);
      }
    }
    // the board's failed jobs, each with its error
    await page.locator('a[href="/queue/emails?status=failed"]').click();
    await page.getByText('Error: the mail server refused the message').first().waitFor();
    const screenshot = join(dir, 'dashboard.png');
    await page.screenshot({ path: screenshot });
    if (process.env.GLIDEMQ_UI_SCREENSHOT) copyFileSync(screenshot, process.env.GLIDEMQ_UI_SCREENSHOT);
    expect(existsSync(screenshot)).to.equal(true);
  });

  it('a queue that appears later is listed without a restart', async () => {
    late = new Queue('reports', { connection: server().url, prefix });
    await late.add('monthly', {});
    await page.goto(url);
    await page.locator('a[href="/queue/reports"]').first().waitFor();
  });

  it('a failed job shows its stack; retry puts it back to waiting', async () => {
    await page.goto(`${url}queue/emails/${badId}`);
    await page.getByText('Error: the mail server refused the message').first().waitFor();
    expect(await page.locator('body').innerText()).to.match(/at .*worker-runner/);

    await page.locator('button:has(svg.lucide-refresh-cw)').first().click();
    const confirm = page.getByRole('alertdialog').or(page.getByRole('dialog'));
    await confirm.getByText('retry this job').waitFor();
    await confirm.getByRole('button', { name: 'Confirm' }).click();
    await waitFor(async () => (await emails.getJobState(badId)) === 'waiting', 'the job waiting');
    await page.goto(`${url}queue/emails?status=waiting`);
    await page.locator(`a[href^="/queue/emails/${badId}?"]`).first().waitFor();
  });

  it('the durability audit is linked from the board and shows each check\'s verdict', async () => {
    await page.goto(url);
    await page.locator('header button:has(svg.lucide-circle-user)').click();
    const link = page.locator('[role="menu"] a', { hasText: 'Durability audit' });
    expect(await link.getAttribute('href')).to.equal('/audit');
    await page.goto(`${url}audit`);
    await page.getByText('Durability audit of').waitFor();
    expect(await page.locator('#summary').innerText()).to.match(/\d+ pass, \d+ warn, \d+ fail/);
    expect(await page.locator('td', { hasText: 'appendonly' }).count()).to.be.above(0);
  });

  it('with --auth, a request without the credentials (or with wrong ones) is refused with 401', async () => {
    const none = await fetch(url);
    expect(none.status).to.equal(401);
    expect(none.headers.get('www-authenticate')).to.match(/^Basic /);
    expect((await fetch(`${url}api/queues`)).status).to.equal(401);
    const wrong = Buffer.from(`${USER}:wrong`).toString('base64');
    expect((await fetch(`${url}api/queues`, { headers: { authorization: `Basic ${wrong}` } })).status).to.equal(401);
    const right = Buffer.from(`${USER}:${PASS}`).toString('base64');
    expect((await fetch(`${url}api/queues`, { headers: { authorization: `Basic ${right}` } })).status).to.equal(200);
  });

  it('on loopback it answers only to loopback names, and refuses a change sent from another site\'s page', async () => {
    const { hostname, port } = new URL(url);
    const status = (headers: Record<string, string>, method = 'GET') =>
      new Promise<number>((resolve, reject) => {
        const req = request({ hostname, port, path: '/api/queues', method, headers: { authorization: `Basic ${Buffer.from(`${USER}:${PASS}`).toString('base64')}`, ...headers } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await status({ host: `localhost:${port}` })).to.equal(200);
    expect(await status({ host: `rebound.example:${port}` })).to.equal(403);
    expect(await status({ host: `${hostname}:${port}`, origin: 'https://elsewhere.example' }, 'PUT')).to.equal(403);
    expect(await status({ host: `${hostname}:${port}`, origin: `http://${hostname}:${port}` }, 'PUT')).to.equal(404); // its own page: on to the board
  });

  it('its start line fits 80 columns: wrapped between words, the lines after the first indented by two spaces', async () => {
    const plain = startCli(['-u', server().url, '--prefix', prefix, 'ui', '--port', '0', '--read-only'], { env: { COLUMNS: '80', GLIDEMQ_UI_AUTH: undefined } });
    const listening = waitFor(() => plain.stdout().includes('(read-only)') || plain.stderr() !== '', 'the start line', START_MS);
    await listening.catch(() => undefined);
    const r = await plain.stop('SIGTERM'); // also when it never listened
    await listening;
    // (the signal too: a run that died of SIGTERM had no handler yet; of SIGKILL, did not close in 10 s)
    expect(r.code, `signal ${String(r.signal)}; stderr: ${r.stderr}`).to.equal(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.length).to.be.above(1);
    expect(lines.filter((l) => l.length > 80)).to.deep.equal([]);
    expect(lines.slice(1).every((l) => /^  \S/.test(l))).to.equal(true);
    expect(lines.map((l) => l.trim()).join(' ')).to.match(new RegExp(`^dashboard of every queue of prefix "${prefix}" at \\S+ on http://127\\.0\\.0\\.1:\\d+/ \\(read-only\\)$`));
  });

  it('bound beyond loopback without credentials it refuses to start: exit 2, one line', async () => {
    const r = await runCli(['-u', server().url, 'ui', '--host', '0.0.0.0', '--port', '0'], { env: { GLIDEMQ_UI_AUTH: undefined } });
    expect(r.code).to.equal(2);
    expect(r.stderr.trim().split('\n')).to.have.length(1);
    expect(r.stderr).to.match(/pass --auth user:pass or set GLIDEMQ_UI_AUTH/);
  });
});
