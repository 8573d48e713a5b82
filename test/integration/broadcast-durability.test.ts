import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { Broadcast, type BroadcastMessage } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker } from '../../src/engine/broadcast/broadcast-worker.js';
import { TestServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';

const HOLDING_WORKER = fileURLToPath(new URL('../fixtures/holding-worker.js', import.meta.url));

/** What a broadcast keeps in Valkey, read raw: the stream, each group's position and pending list, state hashes. */
async function snapshot(c: Redis, b: Broadcast, subs: string[]) {
  const out: Record<string, unknown> = { stream: await c.xrange(b.keys.stream, '-', '+') };
  const groups = (await c.xinfo('GROUPS', b.keys.stream)) as unknown[][];
  out.groups = groups
    .map((g) => {
      const h: Record<string, unknown> = {};
      for (let i = 0; i + 1 < g.length; i += 2) h[String(g[i])] = g[i + 1];
      return [h.name, h['last-delivered-id'], h.pending, h['entries-read']];
    })
    .sort();
  for (const s of subs) {
    out[`pel:${s}`] = ((await c.xpending(b.keys.stream, s, '-', '+', 100)) as unknown[][]).map((p) => [p[0], p[1]]);
    out[`state:${s}`] = await c.hgetall(b.keys.sub(s));
    out[`retry:${s}`] = await c.zrange(b.keys.retry(s), '0', '-1', 'WITHSCORES');
  }
  return out;
}

describe('Broadcast durability (server SIGKILL with AOF always, worker SIGKILL)', function () {
  this.timeout(60_000);
  let server: TestServer;
  const children: ChildProcess[] = [];
  const open: { close(force?: boolean): Promise<void> }[] = [];
  before(async () => {
    server = await new TestServer({ persistence: 'aof-always' }).start();
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(open.splice(0).map((o) => o.close(true)));
  });
  after(() => server.stop());

  function worker(name: string, sub: string, fn: (m: BroadcastMessage) => unknown, opts = {}): BroadcastWorker {
    const w = new BroadcastWorker(name, sub, fn, { connection: server.url, blockTimeout: 500, startFrom: 'earliest', ...opts });
    w.on('error', () => undefined);
    open.push(w);
    return w;
  }

  it('positions, pending claims, retries and kept messages survive a server kill; subscriptions resume after it', async () => {
    const name = uniqueQueue('bc');
    const b = new Broadcast(name, { connection: server.url, maxMessages: 100 });
    open.push(b);
    const seen: Record<string, number[]> = { fast: [], slow: [], flaky: [] };
    const rec = (s: string) => (m: { data: unknown }) => void seen[s].push((m.data as { i: number }).i);
    for (const s of ['fast', 'slow', 'flaky']) {
      const w = worker(name, s, () => undefined, { autorun: false });
      await w.run();
      await w.close();
    }
    for (let i = 0; i < 6; i++) await b.publish('ev', { i });
    const fast = worker(name, 'fast', rec('fast'));
    let hold!: () => void;
    const held = new Promise<void>((r) => (hold = r));
    const slow = worker(name, 'slow', async (m) => {
      rec('slow')(m);
      if ((m.data as { i: number }).i === 2) await held; // a claim pending across the kill
    }, { concurrency: 1, lockDuration: 120_000, stalledInterval: 120_000 });
    const flaky = worker(name, 'flaky', async (m) => {
      rec('flaky')(m);
      throw new Error('later');
    }, { attempts: 2, backoff: 600_000 });
    await waitFor(() => seen.fast.length === 6 && seen.slow.length === 3 && seen.flaky.length === 6, 'the subscriptions to get going');
    await fast.close();
    await flaky.close();
    const c = server.client();
    const before = await snapshot(c, b, ['fast', 'slow', 'flaky']);
    expect((before['retry:flaky'] as string[]).length).to.equal(12); // six messages waiting out their backoff
    expect(before['pel:slow']).to.have.length(1);
    c.disconnect();

    await server.kill();
    await server.start();
    const c2 = server.client();
    expect(await snapshot(c2, b, ['fast', 'slow', 'flaky'])).to.deep.equal(before);

    // published while 'fast' was down: it resumes after its last acknowledged message
    for (let i = 6; i < 9; i++) await b.publish('ev', { i });
    worker(name, 'fast', rec('fast'));
    hold();
    await waitFor(() => seen.fast.length === 9 && seen.slow.length === 9, 'fast and slow to catch up after the restart');
    expect(seen.fast).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(seen.slow).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8]); // the held claim was finished by its own worker
    await slow.close();
    c2.disconnect();
  });

  it("a subscription worker process SIGKILLed while holding a message: another worker of that subscription reclaims and runs it", async () => {
    const name = uniqueQueue('bc');
    const b = new Broadcast(name, { connection: server.url });
    open.push(b);
    const c = server.client();
    const traceKey = `trace:${name}`;
    const others: string[] = [];
    const other = worker(name, 'other', (m) => void others.push(m.id), { autorun: false });
    await other.run(); // the other subscription exists from the start
    const child = spawn(process.execPath, [HOLDING_WORKER, 'broadcast', server.url, name, 'crashy'], {
      // (its claims are stalled once its own lock of 1 s has run out after the kill)
      env: { ...process.env, TRACE_KEY: traceKey, LOCK_MS: '1000', STALLED_MS: '60000', CONCURRENCY: '2' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    await waitFor(async () => (await b.subscriptions()).some((s) => s.name === 'crashy'), 'the child to subscribe');
    const hung = await b.publish('x', { hang: true });
    const fine = await b.publish('x', { hang: false });
    await waitFor(async () => (await c.lrange(traceKey, 0, -1)).length === 2, 'the child to take both');
    await waitFor(() => others.length === 2, 'the other subscription to run both');
    // the child finishes the message that does not hang: kill it only once that finish landed
    const pending = async () => ((await c.xpending(b.keys.stream, 'crashy', '-', '+', 10)) as unknown[][]).length;
    await waitFor(async () => (await pending()) === 1, 'the child to finish the message that does not hang');
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const pel = (await c.xpending(b.keys.stream, 'crashy', '-', '+', 10)) as unknown[][];
    expect(pel.map((p) => p[0])).to.deep.equal([hung]);

    const runs: { id: string; stalled: number }[] = [];
    const rescuer = worker(name, 'crashy', (m) => void runs.push({ id: m.id, stalled: m.stalledCount }), {
      lockDuration: 300,
      stalledInterval: 100,
    });
    await waitFor(() => runs.length === 1, 'the rescuer to reclaim and run the held message');
    expect(runs).to.deep.equal([{ id: hung, stalled: 1 }]);
    await waitFor(async () => ((await c.xpending(b.keys.stream, 'crashy', '-', '+', 10)) as unknown[]).length === 0, 'nothing pending');
    expect(Object.keys(await c.hgetall(b.keys.sub('crashy'))).filter((f) => /^[nas]:/.test(f))).to.deep.equal([]);
    // the other subscription ran each message exactly once and was never touched by the recovery
    expect(others.sort()).to.deep.equal([hung, fine].sort());
    expect(Object.keys(await c.hgetall(b.keys.sub('other'))).filter((f) => /^[nas]:/.test(f))).to.deep.equal([]);
    await rescuer.close();
    c.disconnect();
  });
});
