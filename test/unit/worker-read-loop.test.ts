/**
 * The Worker's read loop without a server: what it does with each reply shape of glidemq_fetch and
 * glidemq_activate ('ok', 'limited', 'rated', 'paused'), and with what a blocking read delivers.
 * A fake client answers the function calls from a script; a fake reader stands in for the
 * blocking connection (the read loop's reader seam).
 */
import { expect } from 'chai';
import type { Acquired, Client } from '../../src/engine/connecting/connection.js';
import type { ClaimReply } from '../../src/engine/jobs/job.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { resolveSettings } from '../../src/engine/consuming/worker-options.js';
import type { Delivery } from '../../src/engine/consuming/blocking-reader.js';
import { ReadLoop, type Reader } from '../../src/engine/consuming/worker-read-loop.js';
import { waitFor } from '../helpers/valkey.js';

const claim = (id: string, fence = '1') => [id, fence, 'job', '{}', '1000', '{}'] as unknown as ClaimReply;

interface Call {
  fn: string;
  args: unknown[];
  at: number;
}

/**
 * A read loop over a fake client: each function call takes the next reply of `replies` (an empty
 * script answers 'ok' with no job); `reads` are what the fake reader's blocking reads deliver, in
 * turn (then nothing, and the loop is stopped).
 */
function fakeLoop(replies: unknown[][], reads: (Delivery | undefined)[] = []) {
  const calls: Call[] = [];
  const events: unknown[][] = [];
  const dispatched: string[] = [];
  const promotions: number[] = [];
  const eventWaits: { maxMs: number; after?: string }[] = [];
  const marks: string[] = [];
  const state = { live: true, room: 4 };
  const client = {
    status: 'ready',
    fcall: async (fn: string, _n: number, _key: string, ...args: unknown[]) => {
      calls.push({ fn, args, at: performance.now() });
      return replies.shift() ?? ['ok'];
    },
    // the change marks of a limited step, and its wait (it ends when the test stops the loop)
    xrevrange: async (key: string) => {
      marks.push(key);
      return [];
    },
    xread: async () => {
      await waitFor(() => !state.live, 'the test to stop the loop');
      return null;
    },
  } as unknown as Client;
  const reader: Reader = {
    client,
    start: async () => undefined,
    read: async () => {
      if (reads.length === 0) state.live = false;
      return reads.shift();
    },
    waitForEvent: async (maxMs: number, after?: string) => void eventWaits.push({ maxMs, after }),
    unblock: async () => undefined,
    close: () => undefined,
  };
  const loop = new ReadLoop(
    {
      client: () => client,
      keys: new QueueKeys('read-loop-unit', 'glide'),
      consumer: 'me',
      settings: resolveSettings({ blockTimeout: 1_000 }),
      claimTerms: [30_000, 1],
      live: () => state.live,
      emit: (event, ...args) => void events.push([event, ...args]),
      emitError: (err) => void events.push(['error', err]),
      acquired: {} as Acquired,
      room: () => state.room,
      dispatch: (reply) => void dispatched.push(String(reply[0])),
      idle: () => true,
      promoteBy: (ms) => void promotions.push(ms),
    },
    () => reader,
  );
  return { loop, calls, events, dispatched, promotions, eventWaits, marks, state };
}

describe('Worker read loop (no server)', () => {
  it("fetch: every claim of an 'ok' or 'limited' reply is dispatched in order; a 'rated' reply's wait is not a claim", async () => {
    const { loop, calls, dispatched } = fakeLoop([
      ['ok', claim('a'), claim('b')],
      ['limited', claim('c')],
      ['rated', '250', claim('d')],
    ]);
    const ok = await loop.fetch(3);
    expect(calls[0].fn).to.equal('glidemq_fetch');
    expect(calls[0].args).to.deep.equal(['me', 3, 30_000, 1]);
    expect(ok.status).to.equal('ok');
    expect(dispatched).to.deep.equal(['a', 'b']);
    expect((await loop.fetch(3)).status).to.equal('limited');
    const rated = await loop.fetch(3);
    expect(rated.status, "a 'rated' reply: the queue is limited, fetches take its jobs").to.equal('limited');
    expect(rated.jobs.map((j) => String(j[0]))).to.deep.equal(['d']);
    expect(dispatched).to.deep.equal(['a', 'b', 'c', 'd']);
  });

  it("queuePaused is told when a reply first says 'paused', queueResumed when one first says otherwise", async () => {
    const { loop, events, dispatched } = fakeLoop([['paused', '7-0'], ['paused', '8-0'], ['ok', claim('a')], ['ok']]);
    for (let i = 0; i < 4; i++) await loop.fetch(1);
    expect(events).to.deep.equal([['queuePaused'], ['queueResumed']]);
    expect(dispatched, "a 'paused' reply carries no claim (its second element is an event id)").to.deep.equal(['a']);
  });

  it("a 'paused' first fetch: the loop waits for the event after the one the reply named, then fetches", async () => {
    const { loop, calls, eventWaits, dispatched } = fakeLoop([['paused', '17-0'], ['ok', claim('a')]]);
    await loop.open();
    await loop.begin();
    // (then a blocking read, which finds nothing: the fake reader stops the loop)
    await waitFor(() => !loop.running && dispatched.length === 1, 'the loop to end');
    expect(eventWaits).to.deep.equal([{ maxMs: 1_000, after: '17-0' }]);
    expect(calls.map((c) => c.fn)).to.deep.equal(['glidemq_fetch', 'glidemq_fetch']);
    expect(calls[1].args[1], 'the fetch after the resume asks for the free room').to.equal(4);
  });

  it('a blocking read: its entries and wake ids go to glidemq_activate, a due time to the promoter, the claims to dispatch', async () => {
    const delivered: Delivery = { streamPairs: ['1-0', 'a', '2-0', 'b'], wakeIds: ['9-0', '9-1'], dueIn: 500 };
    const { loop, calls, dispatched, promotions } = fakeLoop([['ok', claim('a'), claim('b')]], [delivered]);
    await loop.open();
    await loop.loop(false);
    expect(calls.map((c) => c.fn)).to.deep.equal(['glidemq_activate']);
    expect(calls[0].args).to.deep.equal(['me', 4, 30_000, 1, '9-0,9-1', 2, '1-0', 'a', '2-0', 'b']);
    expect(promotions).to.deep.equal([500]);
    expect(dispatched).to.deep.equal(['a', 'b']);
    expect(loop.limited).to.equal(false);
  });

  it("a 'rated' activation: the loop sits out the wait it names, then takes jobs by fetch, not by a blocking read", async () => {
    const delivered: Delivery = { streamPairs: ['1-0', 'a'], wakeIds: [] };
    const { loop, calls, dispatched, state } = fakeLoop([['rated', '150', claim('a')], ['limited']], [delivered]);
    await loop.open();
    const running = loop.loop(false);
    await waitFor(() => calls.length === 2, 'the fetch after the rate wait');
    state.live = false;
    await running;
    expect(dispatched).to.deep.equal(['a']);
    expect(loop.limited).to.equal(true);
    expect(calls[1].fn).to.equal('glidemq_fetch');
    // the wait is the server's answer: no call before it is over (a lower bound, not a speed check)
    expect(calls[1].at - calls[0].at).to.be.at.least(140);
  });

  it("'limited' from an activation: the next step marks the streams, fetches, and waits on them (no blocking read)", async () => {
    const delivered: Delivery = { streamPairs: ['1-0', 'a'], wakeIds: [] };
    const { loop, calls, marks, state } = fakeLoop([['limited', claim('a')], ['limited', claim('b')]], [delivered]);
    await loop.open();
    const running = loop.loop(false);
    await waitFor(() => calls.length === 2, 'the fetch of the limited step');
    state.live = false;
    await running;
    expect(calls.map((c) => c.fn)).to.deep.equal(['glidemq_activate', 'glidemq_fetch']);
    const keys = new QueueKeys('read-loop-unit', 'glide');
    expect(marks).to.deep.equal([keys.events, keys.stream, keys.wake]);
    expect(loop.limited).to.equal(true);
  });
});
