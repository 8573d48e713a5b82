import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker, type BroadcastProcessor, type BroadcastWorkerOptions } from '../../src/engine/broadcast/broadcast-worker.js';
import { InvalidArgumentError, SubscriptionNotFoundError, WrongTypeError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';

describe('Broadcast (real valkey-server)', () => {
  const server = useServer();
  const open: { close(): Promise<void> }[] = [];
  let raw: Redis;
  before(() => {
    raw = server().client();
  });
  after(() => raw.quit());
  afterEach(async () => {
    await Promise.all(open.splice(0).map((o) => (o instanceof BroadcastWorker ? o.close(true) : o.close())));
  });

  function broadcast(name: string, maxMessages = 0): Broadcast {
    const b = new Broadcast(name, { connection: server().url, maxMessages });
    open.push(b);
    return b;
  }

  function worker(name: string, sub: string, fn: BroadcastProcessor, opts: BroadcastWorkerOptions = {}): BroadcastWorker {
    const w = new BroadcastWorker(name, sub, fn, { connection: server().url, blockTimeout: 1000, startFrom: 'earliest', ...opts });
    w.on('error', () => undefined);
    open.push(w);
    return w;
  }

  /** Per-message state fields (fence, attempts, stalls) a subscription still keeps. */
  async function messageState(b: Broadcast, sub: string): Promise<string[]> {
    return Object.keys(await raw.hgetall(b.keys.sub(sub))).filter((f) => /^[nas]:/.test(f));
  }

  /** Starts a subscription's group without processing (so it exists before messages arrive). */
  async function subscribe(name: string, sub: string, opts: BroadcastWorkerOptions = {}): Promise<void> {
    const w = new BroadcastWorker(name, sub, () => undefined, { connection: server().url, autorun: false, startFrom: 'earliest', ...opts });
    await w.run();
    await w.close();
  }

  it('every subscription gets every message once; workers of one subscription share them', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    const seen: Record<string, string[]> = { billing: [], audit: [] };
    for (let i = 0; i < 30; i++) await b.publish('orders.created', { i });
    const track = (sub: string) => async (m: { data: { i: number } }) => void seen[sub].push(String(m.data.i));
    worker(name, 'billing', track('billing'), { concurrency: 3 });
    worker(name, 'billing', track('billing'), { concurrency: 3 });
    worker(name, 'audit', track('audit'));
    await waitFor(() => seen.billing.length === 30 && seen.audit.length === 30, 'both subscriptions to see all 30');
    expect(new Set(seen.billing).size).to.equal(30);
    expect(new Set(seen.audit).size).to.equal(30);
    // entries are kept after processing (no XDEL), and nothing is left pending
    expect(await b.length()).to.equal(30);
    const subs = await b.subscriptions();
    expect(subs.map((s) => [s.name, s.pending, s.lag]).sort()).to.deep.equal([['audit', 0, 0], ['billing', 0, 0]]);
    expect(await messageState(b, 'billing')).to.deep.equal([]);
  });

  it('subject filters: * is one token, > one or more trailing; others are acked unprocessed', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    const star: string[] = [];
    const tail: string[] = [];
    await subscribe(name, 'star', { subjects: ['orders.*'] });
    await subscribe(name, 'tail', { subjects: ['orders.>'] });
    for (const s of ['orders', 'orders.created', 'orders.eu.created', 'invoices.paid', 'orders.updated']) await b.publish(s, { s });
    worker(name, 'star', async (m) => void star.push(m.subject), { subjects: ['orders.*'] });
    worker(name, 'tail', async (m) => void tail.push(m.subject), { subjects: ['orders.>'] });
    await waitFor(async () => (await b.subscriptions()).every((s) => s.lag === 0 && s.pending === 0), 'both to read everything');
    expect(star.sort()).to.deep.equal(['orders.created', 'orders.updated']);
    expect(tail.sort()).to.deep.equal(['orders.created', 'orders.eu.created', 'orders.updated']);
  });

  it('refuses bad subjects, filters, names and options', async () => {
    const b = broadcast(uniqueQueue('bc'));
    for (const s of ['', 'a..b', 'orders.*', 'orders.>']) {
      let err: unknown;
      try {
        await b.publish(s, {});
      } catch (e) {
        err = e;
      }
      expect(err, s).to.be.instanceOf(InvalidArgumentError);
    }
    expect(() => new BroadcastWorker('x', 'a:b', () => undefined, { autorun: false })).to.throw(InvalidArgumentError);
    expect(() => new BroadcastWorker('x', 's', () => undefined, { autorun: false, subjects: ['a.>.b'] })).to.throw(InvalidArgumentError);
    expect(() => new BroadcastWorker('x', 's', () => undefined, { autorun: false, startFrom: 'yesterday' })).to.throw(InvalidArgumentError);
    expect(() => new Broadcast('x', { maxMessages: -1 })).to.throw(InvalidArgumentError);
  });

  it('publish and subscribe refuse a meta key whose keys collapse into one, before any write', async () => {
    const b = broadcast(uniqueQueue('bckeys'));
    await b.publish('orders.new', { a: 1 }); // the library is loaded
    const before = await keyspaceFingerprint(raw);
    // '': the stream key would be '' too; 'meta' and ':meta': no stream name before ':meta'
    for (const meta of ['', 'meta', ':meta', 'x']) {
      const calls: [string, string[]][] = [
        ['glidemq_bcPublish', ['0', '', '0', '0', 'orders.new', '{"a":1}']],
        ['glidemq_bcSubscribe', ['subA', '0', '["orders.*"]']],
      ];
      for (const [fn, argv] of calls) {
        const err = await raw.fcall(fn, 1, meta, ...argv).then(() => undefined, (e: Error) => e);
        expect(String(err), `${fn} with meta key "${meta}"`).to.match(/ERR_INVALID broadcast meta key ".*" \(KEYS\[1\]\) must be/);
        expect(await keyspaceFingerprint(raw), `${fn} with meta key "${meta}" left the keyspace as it was`).to.equal(before);
      }
    }
  });

  it('maxMessages trims the oldest on publish even when a subscription has not read them', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name, 5);
    await subscribe(name, 'slow');
    for (let i = 0; i < 12; i++) await b.publish('t.x', { i });
    expect(await b.length()).to.equal(5);
    const got: number[] = [];
    worker(name, 'slow', async (m) => void got.push((m.data as { i: number }).i));
    await waitFor(() => got.length === 5, 'the five kept messages');
    expect(got).to.deep.equal([7, 8, 9, 10, 11]);
  });

  it('lag counts kept messages not yet read; trimmedUnread the messages maxMessages trimmed before they were read', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name, 10);
    await subscribe(name, 'slow');
    const at = async (sub: string) => (await b.subscriptions()).find((s) => s.name === sub)!;
    const got: number[] = [];
    const read = async (n: number) => {
      const w = worker(name, 'slow', async (m) => void got.push((m.data as { i: number }).i));
      await waitFor(async () => got.length === n && (await at('slow')).pending === 0, `${n} messages read`);
      await w.close();
    };
    for (let i = 0; i < 6; i++) await b.publish('t.x', { i });
    await read(6);
    // 94 more while it is stopped: 10 are kept, so 84 of them are trimmed before it reads them
    for (let i = 6; i < 100; i++) await b.publish('t.x', { i });
    expect(await at('slow')).to.include({ lag: 10, trimmedUnread: 84, pending: 0 });
    // a subscription started from the earliest kept message after the trimming missed nothing
    await subscribe(name, 'late');
    expect(await at('late')).to.include({ lag: 10, trimmedUnread: 0 });
    await read(16);
    expect(got).to.deep.equal([0, 1, 2, 3, 4, 5, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99]);
    // every kept message read: lag 0; the 84 it never got are counted apart
    expect(await at('slow')).to.include({ lag: 0, trimmedUnread: 84, pending: 0 });
    // (the server's own XINFO lag still counts them: 84 with every kept message read)
    const groups = (await raw.xinfo('GROUPS', b.keys.stream)) as unknown[][];
    const slow = groups.find((g) => g[1] === 'slow')!;
    expect(slow[slow.indexOf('lag') + 1]).to.equal(84);
    // lag in the middle of the kept messages comes from their numbers: 3 read of the next 5
    for (let i = 100; i < 105; i++) await b.publish('t.x', { i });
    await raw.xreadgroup('GROUP', 'slow', 'c1', 'COUNT', 3, 'STREAMS', b.keys.stream, '>');
    expect(await at('slow')).to.include({ lag: 2, trimmedUnread: 84, pending: 3 });
    // 'late' read nothing: the 10 kept are unread, and 5 it could have read were trimmed
    expect(await at('late')).to.include({ lag: 10, trimmedUnread: 5 });
  });

  it('lag of messages stored without numbers (before they had them) is counted; a start at an entry id', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    // five messages as an older glidemq stored them: no field n
    const old: string[] = [];
    for (let i = 0; i < 5; i++) old.push((await raw.xadd(b.keys.stream, '*', 'subject', 't.x', 'data', '{}', 'ts', '1'))!);
    await subscribe(name, 'all');
    await subscribe(name, 'mid', { startFrom: old[1] });
    await subscribe(name, 'new', { startFrom: 'latest' });
    for (let i = 0; i < 3; i++) await b.publish('t.x', { i });
    const subs = Object.fromEntries((await b.subscriptions()).map((s) => [s.name, s]));
    expect(subs.all).to.include({ lag: 8, trimmedUnread: 0 });
    expect(subs.mid).to.include({ lag: 6, trimmedUnread: 0 });
    expect(subs.new).to.include({ lag: 3, trimmedUnread: 0 });
    // read up to the first numbered message: from there on the numbers count
    await raw.xreadgroup('GROUP', 'all', 'c1', 'COUNT', 6, 'STREAMS', b.keys.stream, '>');
    expect((await b.subscriptions()).find((s) => s.name === 'all')).to.include({ lag: 2, trimmedUnread: 0, pending: 6 });
  });

  it('a subscription resumes from its last acknowledged message and sees what came while it was down', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    const got: number[] = [];
    await subscribe(name, 'late', { startFrom: 'latest' });
    for (let i = 0; i < 3; i++) await b.publish('e', { i });
    const w = worker(name, 'late', async (m) => void got.push((m.data as { i: number }).i));
    await waitFor(() => got.length === 3, 'the first three');
    await w.close();
    for (let i = 3; i < 6; i++) await b.publish('e', { i });
    worker(name, 'late', async (m) => void got.push((m.data as { i: number }).i), { startFrom: 'latest' });
    await waitFor(() => got.length === 6, 'the three published while it was down');
    expect(got).to.deep.equal([0, 1, 2, 3, 4, 5]);
  });

  it('retries with backoff are per subscription; exhausted attempts go to that subscription only', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    await subscribe(name, 'flaky');
    await subscribe(name, 'steady');
    const flaky: string[] = [];
    const steady: string[] = [];
    const id1 = await b.publish('job', { v: 'retry-once' });
    const id2 = await b.publish('job', { v: 'always-fails' });
    worker(
      name,
      'flaky',
      async (m) => {
        flaky.push(`${(m.data as { v: string }).v}#${m.attemptsMade}`);
        const v = (m.data as { v: string }).v;
        if (v === 'always-fails' || m.attemptsMade === 0) throw new Error(`no ${v}`);
      },
      { attempts: 3, backoff: 40, retryInterval: 5000 },
    );
    worker(name, 'steady', async (m) => void steady.push((m.data as { v: string }).v));
    await waitFor(async () => (await raw.xlen(b.keys.dead('flaky'))) === 1 && flaky.length === 5, 'the flaky subscription to give up');
    expect(flaky.sort()).to.deep.equal(['always-fails#0', 'always-fails#1', 'always-fails#2', 'retry-once#0', 'retry-once#1']);
    expect(steady.sort()).to.deep.equal(['always-fails', 'retry-once']);
    const dead = (await raw.xrange(b.keys.dead('flaky'), '-', '+')) as [string, string[]][];
    expect(dead[0][1]).to.deep.equal(['id', id2, 'subject', 'job', 'reason', 'no always-fails', 'attempts', '3']);
    expect(await raw.exists(b.keys.dead('steady'), b.keys.retry('steady'))).to.equal(0);
    for (const sub of ['flaky', 'steady']) {
      const h = await raw.hgetall(b.keys.sub(sub));
      expect(Object.keys(h).filter((f) => f.includes(id1) || f.includes(id2)), sub).to.deep.equal([]);
    }
    expect((await b.subscriptions()).every((s) => s.pending === 0)).to.equal(true);
  });

  it("a claim a worker stopped heartbeating is reclaimed by another worker of the same subscription only", async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    await subscribe(name, 'a');
    await subscribe(name, 'b');
    let releaseHung!: () => void;
    const hung = new Promise<void>((r) => (releaseHung = r));
    const runs: string[] = [];
    const first = worker(name, 'a', async (m) => {
      runs.push(`first:${m.stalledCount}`);
      await hung;
    }, { lockDuration: 600, stalledInterval: 60_000 });
    const bRuns: number[] = [];
    worker(name, 'b', async (m) => void bRuns.push(m.stalledCount));
    const lost: string[] = [];
    first.on('lost', (m) => lost.push(m.id));
    const id = await b.publish('x', {});
    await waitFor(() => runs.length === 1 && bRuns.length === 1, 'the first worker to hold it');
    // stops heartbeats; its claim stays pending, as after a crash, and is stalled once its own
    // lock (600 ms) has run out
    const closing = first.close(true);
    const second = worker(name, 'a', async (m) => void runs.push(`second:${m.stalledCount}`), { lockDuration: 200, stalledInterval: 100 });
    const stalled: string[] = [];
    second.on('stalled', (sid, _prev, what) => stalled.push(`${sid}:${what}`));
    await waitFor(() => runs.length === 2, 'the second worker to reclaim and run it');
    expect(runs).to.deep.equal(['first:0', 'second:1']);
    expect(stalled).to.deep.equal([`${id}:reclaimed`]);
    expect(bRuns).to.deep.equal([0]); // the other subscription ran it once and was never touched
    releaseHung();
    await closing;
    await waitFor(async () => (await b.subscriptions()).every((s) => s.pending === 0), 'nothing pending');
    expect(await messageState(b, 'a')).to.deep.equal([]);
    expect(await messageState(b, 'b')).to.deep.equal([]);
  });

  it('a message that stalls more than maxStalledCount is given up for that subscription', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    await subscribe(name, 's');
    const id = await b.publish('x', {});
    // a consumer that read the message and died before running it
    await raw.xreadgroup('GROUP', 's', 'dead-consumer', 'COUNT', 1, 'STREAMS', b.keys.stream, '>');
    await raw.hset(b.keys.sub('s'), `s:${id}`, '1'); // it already stalled once
    const runs: string[] = [];
    const w = worker(name, 's', async (m) => void runs.push(m.id), { lockDuration: 50, stalledInterval: 50, maxStalledCount: 1 });
    const stalled: string[] = [];
    w.on('stalled', (sid, _prev, what) => stalled.push(`${sid}:${what}`));
    // the checking worker tells it as a failure, as it tells its processor's last failed attempt
    const failed: { id: string; subject: string; stalledCount: number; willRetry?: boolean; error: string; prev: string }[] = [];
    w.on('failed', (m, err: Error, prev: string) => failed.push({ id: m.id, subject: m.subject, stalledCount: m.stalledCount, willRetry: m.willRetry, error: err.message, prev }));
    await waitFor(async () => (await raw.xlen(b.keys.dead('s'))) === 1, 'the message to be given up');
    expect(runs).to.deep.equal([]);
    expect(stalled).to.deep.equal([`${id}:failed`]);
    await waitFor(() => failed.length === 1, "the checking worker's 'failed' event");
    expect(failed[0]).to.deep.include({ id, subject: 'x', stalledCount: 2, willRetry: false, prev: 'active' });
    expect(failed[0].error).to.match(/stalled more than maxStalledCount/);
    const dead = (await raw.xrange(b.keys.dead('s'), '-', '+')) as [string, string[]][];
    expect(dead[0][1][5]).to.match(/stalled more than maxStalledCount/);
  });

  /** Every key of the broadcast, DUMPed: a refused call must leave all of them as they were. */
  async function dumpAll(b: Broadcast): Promise<Record<string, string | null>> {
    const keys = (await raw.keys(`${b.keys.stream}*`)).sort();
    const out: Record<string, string | null> = {};
    for (const k of keys) out[k] = ((await raw.dumpBuffer(k)) ?? Buffer.alloc(0)).toString('hex');
    return out;
  }

  async function refusal(call: Promise<unknown>): Promise<Error> {
    try {
      await call;
    } catch (err) {
      return err as Error;
    }
    throw new Error('expected the call to be refused');
  }

  it('times come from the server: message ts, and a retry due time answered relative to its now', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    await subscribe(name, 's');
    const id = await b.publish('t.x', { n: 1 });
    const [, fields] = ((await raw.xrange(b.keys.stream, id, id)) as [string, string[]][])[0];
    const ts = Number(fields[fields.indexOf('ts') + 1]);
    expect(ts).to.be.closeTo(Number(id.split('-')[0]), 5); // XADD's id is the server's ms too
    // claim it as a consumer would, fail it with a 60 s backoff, and ask for due retries
    await raw.xreadgroup('GROUP', 's', 'c1', 'COUNT', 1, 'STREAMS', b.keys.stream, '>');
    const [[, fence]] = (await callFunction(raw, 'glidemq_bcActivate', b.keys.meta, ['s', 'c1', 30_000, 1, 1, id, 1])) as [string, number][];
    const status = await callFunction(raw, 'glidemq_bcFinish', b.keys.meta, ['s', 'c1', id, fence, 'failed', 'boom', 60_000, 3]);
    expect(status).to.equal('retrying');
    const [sec, usec] = (await raw.time()) as unknown as [string, string];
    const serverNow = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    expect(Number(await raw.zscore(b.keys.retry('s'), id))).to.be.within(serverNow + 59_000, serverNow + 60_000);
    const [nextDueIn, ...claimed] = (await callFunction(raw, 'glidemq_bcRetries', b.keys.meta, ['s', 'c1', 5, 30_000, 1])) as number[];
    expect(claimed).to.deep.equal([]);
    expect(nextDueIn).to.be.within(59_000, 60_000);
  });

  it('every function checks its arguments, key types and subscription before writing anything', async () => {
    const name = uniqueQueue('bc');
    const b = broadcast(name);
    await subscribe(name, 's');
    const id = await b.publish('a.b', {});
    await raw.xreadgroup('GROUP', 's', 'c1', 'COUNT', 1, 'STREAMS', b.keys.stream, '>');
    const before = await dumpAll(b);
    const call = (fn: string, args: (string | number)[]) => callFunction(raw, fn, b.keys.meta, args);
    const invalid: [string, (string | number)[], RegExp][] = [
      ['glidemq_bcPublish', [-1, '', 0, 0, 'a.b', '{}'], /maxMessages/],
      ['glidemq_bcPublish', ['nan', '', 0, 0, 'a.b', '{}'], /maxMessages/],
      ['glidemq_bcPublish', [0, '', 0, 0, 'a..b', '{}'], /subject/],
      ['glidemq_bcPublish', [0, '', 0, 0, 'a.*', '{}'], /subject/],
      ['glidemq_bcPublish', [0, '', 0, 0, 'a.b'], /data must be/],
      ['glidemq_bcPublish', [0, '', 0, 0, 'a.b', '{}', 'extra'], /expected 6 arguments/],
      ['glidemq_bcPublish', [0, 'p:1', 1, 1, 'a.b', '{}'], /producer/],
      ['glidemq_bcPublish', [0, 'p1', 0, 0, 'a.b', '{}'], /producer, seq and answeredBelow go together/],
      ['glidemq_bcPublish', [0, 'p1', 2, 3, 'a.b', '{}'], /producer, seq and answeredBelow go together/],
      ['glidemq_bcSubscriptions', ['extra'], /expected 0 arguments/],
      ['glidemq_bcSubscribe', ['t', 'later', '[]'], /start/],
      ['glidemq_bcSubscribe', ['t', '99999999999999999999999-0', '[]'], /start/],
      ['glidemq_bcSubscribe', ['t', '$', '{"a":1}'], /subjects/],
      ['glidemq_bcSubscribe', ['a:b', '$', '[]'], /subscription/],
      ['glidemq_bcActivate', ['s', 'c1', 30_000, 1, 2, id, 1], /count is 2/],
      ['glidemq_bcActivate', ['s', 'c1', 30_000, 1, 1, id, 'yes'], /run/],
      ['glidemq_bcActivate', ['s', 'c1', 30_000, 1, 1, 'nope', 1], /entryId/],
      ['glidemq_bcFinish', ['s', 'c1', id, 1, 'maybe', '', -1, 1], /outcome/],
      ['glidemq_bcFinish', ['s', 'c1', id, 1, 'failed', '', 'inf', 1], /retryDelay/],
      ['glidemq_bcFinish', ['s', 'c1', id, 1, 'failed', '', 10, 0], /maxAttempts/],
      ['glidemq_bcRetries', ['s', 'c1', 1e300, 30_000, 1], /count/],
      ['glidemq_bcReclaim', ['s', 'c1', -5, 1, 10], /minIdle/],
      ['glidemq_bcExtend', ['s', 'c1', 1, id], /count is 1/],
      ['glidemq_bcExtend', ['s', 'c1', 1, id, 1.5], /fence/],
      ['glidemq_bcRemoveIdleConsumer', ['s', ''], /consumer/],
    ];
    for (const [fn, args, what] of invalid) {
      const err = await refusal(call(fn, args));
      expect(err, `${fn} ${JSON.stringify(args)}`).to.be.instanceOf(InvalidArgumentError);
      expect(err.message, fn).to.match(what);
      expect(err.message, fn).to.contain(fn);
    }
    for (const [fn, args] of [
      ['glidemq_bcActivate', ['gone', 'c1', 30_000, 1, 1, id, 1]],
      ['glidemq_bcFinish', ['gone', 'c1', id, 1, 'completed', '', -1, 1]],
      ['glidemq_bcRetries', ['gone', 'c1', 1, 30_000, 1]],
      ['glidemq_bcReclaim', ['gone', 'c1', 0, 1, 10]],
      ['glidemq_bcExtend', ['gone', 'c1', 1, id, 1]],
    ] as [string, (string | number)[]][]) {
      expect(await refusal(call(fn, args)), fn).to.be.instanceOf(SubscriptionNotFoundError);
    }
    // keys another program wrote with other types
    await raw.set(b.keys.retry('s'), 'x');
    await raw.set(b.keys.dead('s'), 'x');
    await raw.set(b.keys.producerPrefix + 'p1', 'x');
    const typed = await dumpAll(b);
    for (const [fn, args] of [
      ['glidemq_bcPublish', [0, 'p1', 1, 1, 'a.b', '{}']],
      ['glidemq_bcActivate', ['s', 'c1', 30_000, 1, 1, id, 1]],
      ['glidemq_bcFinish', ['s', 'c1', id, 1, 'failed', 'boom', -1, 1]],
      ['glidemq_bcRetries', ['s', 'c1', 1, 30_000, 1]],
      ['glidemq_bcReclaim', ['s', 'c1', 0, 1, 10]],
      ['glidemq_bcExtend', ['s', 'c1', 1, id, 1]],
    ] as [string, (string | number)[]][]) {
      expect(await refusal(call(fn, args)), fn).to.be.instanceOf(WrongTypeError);
    }
    expect(await dumpAll(b)).to.deep.equal(typed);
    await raw.del(b.keys.retry('s'), b.keys.dead('s'), b.keys.producerPrefix + 'p1');
    expect(await dumpAll(b)).to.deep.equal(before);
    // a meta key of another type: publish writes nothing, not even the message
    await raw.del(b.keys.meta);
    await raw.set(b.keys.meta, 'x');
    const len = await raw.xlen(b.keys.stream);
    expect(await refusal(call('glidemq_bcPublish', [0, '', 0, 0, 'a.b', '{}']))).to.be.instanceOf(WrongTypeError);
    expect(await refusal(call('glidemq_bcPublish', [0, 'p1', 1, 1, 'a.b', '{}']))).to.be.instanceOf(WrongTypeError);
    expect(await raw.xlen(b.keys.stream)).to.equal(len);
  });
});
