/**
 * The Worker's claim rules without a server: which lost claim is news (the lock keeper and the
 * runner), and how a run follows a newer claim of its own job (claimAgain), driven by fakes of
 * the parts' small interfaces.
 */
import { expect } from 'chai';
import type { Client } from '../../src/engine/connecting/connection.js';
import type { ClaimReply, Job } from '../../src/engine/jobs/job.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import type { Maintenance } from '../../src/engine/administering/maintenance.js';
import { resolveSettings } from '../../src/engine/consuming/worker-options.js';
import { LockKeeper } from '../../src/engine/consuming/worker-lock-keeper.js';
import { Runner, type Run, type RunFinisher } from '../../src/engine/consuming/worker-runner.js';
import { Finisher } from '../../src/engine/consuming/worker-finisher.js';
import type { WorkerPart } from '../../src/engine/consuming/worker-part.js';

const job = (id: string, fence: string) => ({ id, claim: { fence }, moved: false }) as unknown as Job;

/** A part view over a fake client: `fcall` answers with `answer(fn, args)`; events land in `events`. */
function fakePart(answer: (fn: string, args: unknown[]) => Promise<unknown>) {
  const events: unknown[][] = [];
  const calls: unknown[][] = [];
  const client = {
    status: 'ready',
    fcall: (fn: string, _n: number, _key: string, ...args: unknown[]) => {
      calls.push([fn, ...args]);
      return answer(fn, args);
    },
  } as unknown as Client;
  const part: WorkerPart = {
    client: () => client,
    keys: new QueueKeys('claims-unit', 'glide'),
    consumer: 'me',
    settings: resolveSettings({ lockDuration: 60_000, stalledInterval: 60_000 }),
    claimTerms: [60_000, 1],
    live: () => true,
    emit: (event, ...args) => void events.push([event, ...args]),
    emitError: (err) => void events.push(['error', err]),
  };
  return { part, events, calls };
}

describe('Worker claim rules (no server)', () => {
  it('the lock keeper sends every held claim and tells lockLost only for a lost claim that is news, by the fence it sent', async () => {
    const held = [job('a', '1'), job('b', '2'), job('c', '3')];
    const { part, events, calls } = fakePart(async () => ['a', 'b', 'zzz']);
    const asked: string[] = [];
    const keeper = new LockKeeper({
      ...part,
      maintenance: () => ({}) as Maintenance,
      held: (into) => void into.push(...held),
      // 'a' still runs under its claim; 'b' finishes already (no news)
      lose: (id, fence) => (asked.push(`${id}:${fence}`), id === 'a'),
    });
    expect(await keeper.heartbeat()).to.equal(true);
    expect(calls).to.deep.equal([['glidemq_extendLocks', 'me', 'a', '1', 'b', '2', 'c', '3']]);
    expect(asked, 'an id the keeper did not send is ignored').to.deep.equal(['a:1', 'b:2']);
    expect(events).to.deep.equal([['lockLost', 'a']]);
  });

  it('a heartbeat while one waits joins it, and a failed one resolves false with the error reported', async () => {
    let fail!: (err: Error) => void;
    const { part, events, calls } = fakePart(() => new Promise((_r, reject) => (fail = reject)));
    const keeper = new LockKeeper({ ...part, maintenance: () => ({}) as Maintenance, held: (into) => void into.push(job('a', '1')), lose: () => true });
    const first = keeper.heartbeat();
    const second = keeper.heartbeat();
    expect(second).to.equal(first);
    fail(new Error('connection is closed'));
    expect(await first).to.equal(false);
    expect(calls).to.have.length(1);
    expect(events.map((e) => e[0])).to.deep.equal(['error']);
  });

  it('the runner: a lost claim is news only while its run runs under it, and aborts that run', () => {
    const { part } = fakePart(async () => []);
    const runner = new Runner(
      { ...part, wasMarked: () => false, noteRun: () => undefined, finisher: {} as RunFinisher, fetchOne: async () => undefined, afterSlotFreed: () => undefined },
      async (_job: Job, _token?: string, _signal?: AbortSignal) => 'done',
    );
    const running: Run = { job: job('a', '5'), finishing: false, abort: new AbortController() };
    const finishing: Run = { job: job('b', '5'), finishing: true, abort: new AbortController() };
    runner.active.set('a', running).set('b', finishing);
    expect(runner.lose('x', '1'), 'not running here').to.equal(undefined);
    expect(runner.lose('a', '4'), 'an older claim').to.equal(false);
    expect(runner.lose('b', '5'), 'its finish is on its way').to.equal(false);
    expect(finishing.abort!.signal.aborted).to.equal(false);
    expect(runner.lose('a', '5')).to.equal(true);
    expect(running.abort!.signal.aborted).to.equal(true);
  });

  it('the runner: a newer claim of a running job becomes its claim; of a finishing one, waits as next; an older or the same one is dropped', () => {
    const { part } = fakePart(async () => []);
    const runner = new Runner(
      { ...part, wasMarked: () => false, noteRun: () => undefined, finisher: {} as RunFinisher, fetchOne: async () => undefined, afterSlotFreed: () => undefined },
      async () => 'done',
    );
    const reply = (id: string, fence: string) => [id, fence] as unknown as ClaimReply;
    const running: Run = { job: job('a', '5'), finishing: false };
    runner.claimAgain(running, reply('a', '5'));
    runner.claimAgain(running, reply('a', '4'));
    expect(running.job.claim!.fence).to.equal('5');
    runner.claimAgain(running, reply('a', '7'));
    expect(running.job.claim!.fence).to.equal('7');
    const finishing: Run = { job: job('b', '5'), finishing: true };
    runner.active.set('b', finishing);
    runner.claimAgain(finishing, reply('b', '6'));
    expect(finishing.job.claim!.fence, 'the finish on its way keeps its fence').to.equal('5');
    expect(String(finishing.next![1])).to.equal('6');
    runner.claimAgain(finishing, reply('b', '6'));
    runner.claimAgain(finishing, reply('b', '3'));
    expect(String(finishing.next![1])).to.equal('6');
    expect(runner.holds('b', '5')).to.equal(true);
    expect(runner.holds('b', '6')).to.equal(true);
    expect(runner.holds('b', '4')).to.equal(false);
    expect(runner.holds('c', '1')).to.equal(undefined);
  });

  it('the finisher: a newer claim that reached a finishing run after its finish took `next` is dispatched with the next jobs, not lost', () => {
    // (a batch's replies resolve in order: an earlier request's share may hold this job's retry
    // claim, and that request's run applies it while this run's finish already looked at `next`)
    const { part } = fakePart(async () => []);
    const dispatched: string[] = [];
    const finisher = new Finisher({
      ...part,
      ledger: { startBuffered: () => undefined, nextFetchCount: () => 0, prefetchNow: () => 0, inbound: 0 },
      dispatch: (claim) => void dispatched.push(`${String(claim[0])}:${String(claim[1])}`),
      afterSlotFreed: () => undefined,
    });
    const run: Run = { job: Object.assign(job('a', '1'), { opts: {}, stacktrace: [], attemptsMade: 0 }), finishing: true };
    const request = finisher.request(run, 'failed', 'boom', 0, new Error('boom'), 1);
    run.next = ['a', '2'] as unknown as ClaimReply;
    finisher.apply(run, request, { reply: ['retried'], next: [['n', '1'] as unknown as ClaimReply] }, new Error('boom'));
    expect(dispatched).to.deep.equal(['n:1', 'a:2']);
    expect(run.next).to.equal(undefined);
  });
});
