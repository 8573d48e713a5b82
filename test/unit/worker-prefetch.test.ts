/**
 * The Worker's prefetch buffer (its slot ledger) without a server: the room a read, a fetch or a
 * finish may take, and the adaptive prefetch's sizing, from counts a fake worker sets.
 */
import { expect } from 'chai';
import type { Client } from '../../src/engine/connecting/connection.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { resolveSettings, type WorkerOptions } from '../../src/engine/consuming/worker-options.js';
import { PREFETCH_BYTES, PREFETCH_CAP, PrefetchBuffer } from '../../src/engine/consuming/worker-prefetch.js';

/** A buffer over counts the test sets in `state`; `started` lists the jobs it ran. */
function ledger(opts: WorkerOptions) {
  const state = { processing: 0, reserved: 0, limited: false, rttMs: 0, paused: false, live: true, closing: false };
  const started: string[] = [];
  const buffer = new PrefetchBuffer({
    client: () => ({}) as Client,
    keys: new QueueKeys('prefetch-unit', 'glide'),
    consumer: 'unit',
    settings: resolveSettings(opts),
    claimTerms: [30_000, 1],
    live: () => state.live,
    emit: () => undefined,
    emitError: () => undefined,
    processing: () => state.processing,
    reserved: () => state.reserved,
    limited: () => state.limited,
    rttMs: () => state.rttMs,
    paused: () => state.paused,
    closing: () => state.closing,
    start: (job) => {
      started.push(job.id);
      state.processing++;
    },
  });
  return { buffer, state, started };
}

const job = (id: string, fence = '1') => ({ id, claim: { fence } }) as unknown as Job;

describe('Worker prefetch buffer (no server)', () => {
  it('room is the free slots and the prefetch asked for, less what runs, waits, is on its way or may be delivered', () => {
    const { buffer, state } = ledger({ concurrency: 4, prefetch: 2 });
    expect(buffer.readerRoom()).to.equal(6);
    state.processing = 2;
    buffer.jobs.set('a', job('a'));
    buffer.inbound = 1;
    state.reserved = 1;
    expect(buffer.readerRoom()).to.equal(6 - 2 - 1 - 1 - 1);
    expect(buffer.nextFetchCount()).to.equal(1);
    state.paused = true;
    expect(buffer.readerRoom()).to.equal(0);
    expect(buffer.nextFetchCount()).to.equal(0);
    state.paused = false;
    state.live = false; // closing: a finish asks for nothing more
    expect(buffer.nextFetchCount()).to.equal(0);
    state.live = true;
    state.processing = 6; // more on their way than room: a finish never asks for a negative count
    expect(buffer.nextFetchCount()).to.equal(0);
  });

  it('the shaper of finish calls: the slots and the prefetch circulate; the slots lack what neither runs, waits nor is asked for by calls sent', () => {
    const { buffer, state } = ledger({ concurrency: 4, prefetch: 6 });
    expect(buffer.shaper.circulating()).to.equal(4 + 6);
    state.processing = 1;
    buffer.jobs.set('a', job('a'));
    buffer.inbound = 5; // of which 3 are asked for by finishes not sent yet
    expect(buffer.shaper.slotsShort(3)).to.equal(4 - 1 - 1 - (5 - 3));
    expect(buffer.shaper.slotsShort(0), 'none when the calls sent bring enough').to.be.below(1);
  });

  it('the adaptive prefetch: none before a round trip is known or on a limited queue; slots x round trip / run time, capped per slot and by bytes', () => {
    const { buffer, state } = ledger({ concurrency: 2 });
    buffer.noteRun(10);
    expect(buffer.prefetchNow(), 'no round trip measured yet').to.equal(0);
    state.rttMs = 20;
    expect(buffer.prefetchNow()).to.equal(Math.floor((2 * 20) / 10));
    expect(buffer.readerRoom(), 'a read never fills the adaptive prefetch').to.equal(2);
    expect(buffer.nextFetchCount(), 'a finish fills it').to.equal(2 + 4);
    state.limited = true;
    expect(buffer.prefetchNow()).to.equal(0);
    state.limited = false;
    buffer.noteRun(0); // the average moves a tenth of the way: 9 ms
    expect(buffer.prefetchNow()).to.equal(Math.floor(40 / 9));
    state.rttMs = 10_000;
    expect(buffer.prefetchNow(), 'at most PREFETCH_CAP per slot').to.equal(PREFETCH_CAP * 2);
    buffer.noteBytes(PREFETCH_BYTES / 3);
    expect(buffer.prefetchNow(), 'at most PREFETCH_BYTES of data').to.equal(3);
  });

  it('starts waiting claims in the order they came while slots are free, and keeps the rest', () => {
    const { buffer, state, started } = ledger({ concurrency: 2 });
    for (const id of ['a', 'b', 'c']) buffer.jobs.set(id, job(id));
    buffer.startBuffered();
    expect(started).to.deep.equal(['a', 'b']);
    expect([...buffer.jobs.keys()]).to.deep.equal(['c']);
    state.processing = 1;
    state.closing = true;
    buffer.startBuffered();
    expect(started, 'none starts once close() began').to.deep.equal(['a', 'b']);
  });

  it('holds and drops a claim only under its own fence', () => {
    const { buffer } = ledger({ concurrency: 1 });
    buffer.jobs.set('a', job('a', '3'));
    expect(buffer.holds('a', '3')).to.equal(true);
    expect(buffer.holds('a', '2')).to.equal(false);
    buffer.drop('a', '2');
    expect(buffer.jobs.has('a')).to.equal(true);
    buffer.drop('a', '3');
    expect(buffer.jobs.has('a')).to.equal(false);
  });
});
