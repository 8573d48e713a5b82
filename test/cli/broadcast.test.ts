import { expect } from 'chai';
import { join } from 'node:path';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { runCli } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, useServer } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

const processor = (file: string) => join(REPO_ROOT, 'fixtures', 'processors', file);

describe('CLI: publish, worker --broadcast --subscription', function () {
  this.timeout(60000);
  const server = useServer();
  const cli = (args: string[]) => runCli(['-u', server().url, ...args]);
  let name: string;
  let b: Broadcast;
  beforeEach(() => {
    name = uniqueQueue('bcli');
    b = new Broadcast(name, { connection: server().url });
  });
  afterEach(() => b.close());

  it('publish prints the entry id; --json prints {id, broadcast, subject}; --max-messages trims', async () => {
    const a = await cli(['publish', name, 'orders.created', '{"id":1}']);
    expect(a.code, a.stderr).to.equal(0);
    expect(a.stdout.trim()).to.match(/^\d+-\d+$/);
    const j = await cli(['publish', name, 'orders.paid', '--json']);
    expect(j.code, j.stderr).to.equal(0);
    const out = JSON.parse(j.stdout);
    expect(out).to.include({ broadcast: name, subject: 'orders.paid' });
    expect(out.id).to.match(/^\d+-\d+$/);
    const entries = (await b.client.xrange(b.keys.stream, '-', '+')) as [string, string[]][];
    expect(entries.map((e) => e[1].slice(0, 4))).to.deep.equal([
      ['subject', 'orders.created', 'data', '{"id":1}'],
      ['subject', 'orders.paid', 'data', '{}'],
    ]);
    const t = await cli(['publish', name, 'orders.x', '{}', '--max-messages', '1']);
    expect(t.code, t.stderr).to.equal(0);
    expect(await b.length()).to.equal(1);
  });

  it('bad input and an unreachable server exit 2 with one line', async () => {
    const cases: [string[], RegExp][] = [
      [['publish', name, 'orders.*', '{}'], /wildcards/],
      [['publish', name, 'a..b'], /empty token/],
      [['publish', name, 'ok', '{not json'], /data/],
      [['publish', name, 'ok', '{}', '--max-messages', '0'], /--max-messages/],
      [['publish', 'bad:name', 'ok'], /broadcast name/],
      [['worker', processor('echo.mjs'), '--broadcast', name], /--subscription/],
      [['worker', processor('echo.mjs'), '--queue', 'q', '--broadcast', name, '--subscription', 's'], /not both/],
      [['worker', processor('echo.mjs'), '--queue', 'q', '--subjects', 'a.*'], /only with --broadcast/],
      [['worker', processor('echo.mjs'), '--broadcast', name, '--subscription', 's', '--subjects', 'a.>.b'], /last token/],
      [['worker', processor('echo.mjs'), '--broadcast', name, '--subscription', 's', '--start-from', 'soon'], /--start-from/],
    ];
    await inParallel(cases, async ([args, msg]) => {
      const r = await cli(args);
      expect(r.code, args.join(' ')).to.equal(2);
      expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1);
      expect(r.stderr, args.join(' ')).to.match(msg);
    });
    const port = await freePort();
    const down = await runCli(['-u', `redis://127.0.0.1:${port}`, 'publish', name, 'x']);
    expect(down.code).to.equal(2);
    expect(down.stderr).to.match(/cannot reach|ECONNREFUSED|connect/i);
  });

  it('worker --broadcast runs the subscription (filters, retries) and --exit-when-idle exits 0', async () => {
    for (const s of ['orders.created', 'users.created', 'orders.eu.paid']) await b.publish(s, { s });
    const r = await cli([
      'worker', processor('fail-twice.mjs'), '--broadcast', name, '--subscription', 'audit', '--subjects', 'orders.>',
      '--start-from', 'earliest', '--attempts', '3', '--backoff', 'fixed:10', '--exit-when-idle', '--json',
    ]);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    const done = lines.filter((l) => l.status === 'completed').map((l) => l.subject).sort();
    expect(done).to.deep.equal(['orders.created', 'orders.eu.paid']);
    expect(lines.filter((l) => l.status === 'failed' && l.willRetry)).to.have.length(4);
    for (const l of lines) expect(l).to.include.keys('id', 'status', 'durationMs', 'subject', 'subscription');
    const [sub] = await b.subscriptions();
    expect(sub).to.include({ name: 'audit', pending: 0, lag: 0 });
    // a second run of the same subscription has nothing left to do
    const again = await cli(['worker', processor('echo.mjs'), '--broadcast', name, '--subscription', 'audit', '--exit-when-idle', '--json']);
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stdout.trim()).to.equal('');
  });

  it('subscriptions lists lag and trimmed-unread apart; worker --exit-when-idle exits once every kept message is read', async () => {
    const none = await cli(['subscriptions', name]);
    expect(none.code, none.stderr).to.equal(0);
    expect(none.stdout).to.match(/no subscriptions/);
    expect(JSON.parse((await cli(['subscriptions', name, '--json'])).stdout)).to.deep.equal([]);
    // the subscription starts (nothing to do yet), then 5 messages come with 2 kept: 3 trimmed unread
    const first = await cli(['worker', processor('echo.mjs'), '--broadcast', name, '--subscription', 'audit', '--exit-when-idle', '--json']);
    expect(first.code, first.stderr).to.equal(0);
    const capped = new Broadcast(name, { connection: server().url, maxMessages: 2 });
    try {
      for (let i = 0; i < 5; i++) await capped.publish('orders.created', { i });
    } finally {
      await capped.close();
    }
    const before = JSON.parse((await cli(['subscriptions', name, '--json'])).stdout);
    expect(before).to.have.length(1);
    expect(before[0]).to.include({ name: 'audit', lag: 2, trimmedUnread: 3, pending: 0 });
    expect(before[0]).to.have.all.keys('name', 'lastDeliveredId', 'pending', 'lag', 'trimmedUnread', 'consumers');
    // idle = every kept message read: the 3 it never gets do not keep it waiting
    const r = await cli(['worker', processor('echo.mjs'), '--broadcast', name, '--subscription', 'audit', '--exit-when-idle', '--json']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l).status)).to.deep.equal(['completed', 'completed']);
    const after = JSON.parse((await cli(['subscriptions', name, '--json'])).stdout);
    expect(after[0]).to.include({ name: 'audit', lag: 0, trimmedUnread: 3, pending: 0 });
    const t = await cli(['subscriptions', name]);
    expect(t.code, t.stderr).to.equal(0);
    expect(t.stdout).to.match(/subscription\s.*lag\s.*trimmed-unread\s.*pending/);
    expect(t.stdout).to.match(/audit\s*│?\s*0\s*│?\s*3\s*│?\s*0/);
    expect(t.stdout).to.match(/2 messages kept/);
  });

  it('--fail-fast exits 1 once a message fails for good', async () => {
    await b.publish('x', {});
    const r = await cli(['worker', processor('always-fail.mjs'), '--broadcast', name, '--subscription', 's', '--start-from', 'earliest', '--fail-fast']);
    expect(r.code, r.stderr).to.equal(1);
    expect(r.stdout).to.match(/this processor always fails/);
  });
});
