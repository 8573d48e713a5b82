/**
 * The Worker's runner without a server: user code (a listener, a processor) that throws is
 * reported and never wedges a slot, and a lost claim aborts its run's AbortSignal. The runner
 * runs with a real finisher over a fake client that answers each finish with a status the test
 * sets, and emits through a SafeEmitter, as the Worker does.
 */
import { expect } from 'chai';
import type { Client } from '../../src/engine/connecting/connection.js';
import { Job, type ClaimReply } from '../../src/engine/jobs/job.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { ListenerError, SafeEmitter } from '../../src/engine/shared/safe-emitter.js';
import { resolveSettings } from '../../src/engine/consuming/worker-options.js';
import { Finisher } from '../../src/engine/consuming/worker-finisher.js';
import { Runner, type Processor } from '../../src/engine/consuming/worker-runner.js';
import { waitFor } from '../helpers/valkey.js';

const keys = new QueueKeys('runner-unit', 'glide');
const claim = (id: string, fence = '1') => [id, fence, 'job', '{}', '1000', '{}'] as unknown as ClaimReply;

/** A runner of `processor`; `status` is what the server answers each finish; `events` what was emitted. */
function fakeRunner(processor: Processor) {
  const finishes: unknown[][] = [];
  const state = { status: 'completed', freed: 0 };
  const client = {
    status: 'ready',
    fcall: async (fn: string, _n: number, _key: string, ...args: unknown[]) => {
      finishes.push([fn, ...args]);
      return [state.status];
    },
  } as unknown as Client;
  const emitter = new SafeEmitter();
  const events: unknown[][] = [];
  const errors: unknown[] = [];
  emitter.on('error', (err) => void errors.push(err));
  const part = {
    client: () => client,
    keys,
    consumer: 'me',
    settings: resolveSettings({}),
    claimTerms: [30_000, 1] as [number, number],
    live: () => true,
    emit: (event: string, ...args: unknown[]) => {
      events.push([event, ...args]);
      emitter.emit(event, ...args);
    },
    emitError: (err: unknown) => void emitter.emit('error', err),
  };
  const afterSlotFreed = () => void state.freed++;
  const ledger = { inbound: 0, startBuffered: () => undefined, nextFetchCount: () => 0, prefetchNow: () => 0 };
  const finisher = new Finisher({ ...part, ledger, dispatch: () => undefined, afterSlotFreed });
  const runner = new Runner(
    { ...part, wasMarked: () => false, noteRun: () => undefined, finisher, fetchOne: async () => undefined, afterSlotFreed },
    processor,
  );
  const start = (id: string, fence = '1') => runner.start(runner.jobOf(claim(id, fence)));
  return { runner, emitter, events, errors, finishes, state, start };
}

describe('Worker runner (no server)', () => {
  it('a listener that throws is reported as an error event; the run still finishes, frees its slot, and the next job runs', async () => {
    const { runner, emitter, errors, finishes, state, start } = fakeRunner(async (job: Job) => `done ${job.id}`);
    emitter.on('active', () => {
      throw new Error('the active listener broke');
    });
    emitter.on('completed', async () => {
      throw new Error('the completed listener broke');
    });
    start('a');
    await waitFor(() => state.freed === 1 && errors.length === 2, 'the run of a to end and both throws to be reported');
    expect(errors.map((e) => (e as ListenerError).event)).to.deep.equal(['active', 'completed']);
    expect(errors.every((e) => e instanceof ListenerError)).to.equal(true);
    expect(finishes.map((f) => f.slice(0, 5))).to.deep.equal([['glidemq_finish', 'a', '1', 'me', 'completed']]);
    expect(runner.active.size).to.equal(0);
    start('b');
    await waitFor(() => state.freed === 2, 'the next job to run');
    expect(finishes.map((f) => [f[1], f[5]])).to.deep.equal([['a', '"done a"'], ['b', '"done b"']]);
    expect(runner.processing()).to.equal(0);
  });

  it('a processor that throws is a failed job: the failure is stored with its stack, and the slot is freed', async () => {
    const { runner, events, finishes, state, start } = fakeRunner(async () => {
      throw new Error('boom');
    });
    state.status = 'failed';
    start('a');
    await waitFor(() => state.freed === 1, 'the run to end');
    // (no backoff: a retry would run at once; the server counts the attempts left)
    const [, id, , , outcome, value, retryDelay] = finishes[0];
    expect([id, value, retryDelay]).to.deep.equal(['a', 'boom', 0]);
    expect(String(outcome)).to.match(/^failed:Error: boom/);
    const failed = events.find((e) => e[0] === 'failed')!;
    expect((failed[1] as Job).failedReason).to.equal('boom');
    expect((failed[2] as Error).message).to.equal('boom');
    expect(runner.active.size).to.equal(0);
  });

  it("a lost claim aborts its run's signal with the reason; the run ends as its processor decides, its finish under that claim", async () => {
    let seen: AbortSignal | undefined;
    const { runner, events, finishes, state, start } = fakeRunner(
      (_job: Job, _token?: string, signal?: AbortSignal) =>
        new Promise((_resolve, reject) => {
          seen = signal;
          signal!.addEventListener('abort', () => reject(signal!.reason));
        }),
    );
    state.status = 'stale'; // another worker holds the job now
    start('a', '7');
    await waitFor(() => seen !== undefined, 'the processor to start');
    expect(runner.lose('a', '6'), 'an older claim is no news').to.equal(false);
    expect(seen!.aborted).to.equal(false);
    expect(runner.lose('a', '7')).to.equal(true);
    expect(seen!.aborted).to.equal(true);
    expect(String(seen!.reason)).to.match(/job a: the claim was lost/);
    await waitFor(() => state.freed === 1, 'the run to end');
    expect(finishes.map((f) => f.slice(1, 3))).to.deep.equal([['a', '7']]);
    expect(events.map((e) => e[0])).to.deep.equal(['active', 'lost']);
  });
});
