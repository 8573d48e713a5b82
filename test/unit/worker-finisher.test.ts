/**
 * The Worker's finisher without a server: how the results ready together are batched, how the
 * next claims a reply carries are handed on, and what a finish answered 'stale' does. A fake
 * client holds each function call until the test answers it.
 */
import { expect } from 'chai';
import type { Client } from '../../src/engine/connecting/connection.js';
import { Job, type ClaimReply } from '../../src/engine/jobs/job.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { resolveSettings } from '../../src/engine/consuming/worker-options.js';
import { Finisher } from '../../src/engine/consuming/worker-finisher.js';
import type { FetchShaper } from '../../src/engine/consuming/finish-batch.js';
import type { Finished, Run } from '../../src/engine/consuming/worker-runner.js';
import { waitFor } from '../helpers/valkey.js';

const keys = new QueueKeys('finisher-unit', 'glide');
const claim = (id: string, fence = '1') => [id, fence, 'job', '{}', '1000', '{}'] as unknown as ClaimReply;

interface Call {
  fn: string;
  args: unknown[];
  answer: (reply: unknown[]) => void;
  fail: (err: Error) => void;
}

/**
 * A finisher over a fake client and ledger. `log` holds what it tells its worker, in order:
 * events ('completed a'), claims dispatched ('dispatch n1 ahead') and freed slots ('freed').
 */
function fakeFinisher(shaper?: FetchShaper) {
  const calls: Call[] = [];
  const log: string[] = [];
  const errors: unknown[] = [];
  const client = {
    status: 'ready',
    fcall: (fn: string, _n: number, _key: string, ...args: unknown[]) =>
      new Promise<unknown[]>((answer, fail) => calls.push({ fn, args, answer, fail })),
  } as unknown as Client;
  // the slot ledger: how many next jobs a finish asks for and the prefetch wanted are set by a test
  const ledger = {
    inbound: 0,
    fetchCount: 0,
    prefetch: 0,
    startBuffered: () => undefined,
    nextFetchCount: () => ledger.fetchCount,
    prefetchNow: () => ledger.prefetch,
    shaper,
  };
  const finisher = new Finisher({
    client: () => client,
    keys,
    consumer: 'me',
    settings: resolveSettings({}),
    claimTerms: [30_000, 1],
    live: () => true,
    emit: (event, job) => void log.push(`${event} ${(job as Job).id}`),
    emitError: (err) => void errors.push(err),
    ledger,
    dispatch: (reply, ahead) => void log.push(`dispatch ${String(reply[0])}:${String(reply[1])}${ahead ? ' ahead' : ''}`),
    afterSlotFreed: () => void log.push('freed'),
  });
  /** A run of job `id` under claim `fence` whose processor is done. */
  const run = (id: string, fence = '1'): Run => ({
    job: Job.fromClaim(claim(id, fence), { client, keys, consumer: 'me', fence: '' }, Date.now()),
    finishing: true,
  });
  /**
   * The finish of `r` as the runner makes it: request, send, then settle and apply once done is told
   * (a 'stale', refused or failed reply goes on in finishRun).
   */
  const finish = (r: Run, outcome: 'completed' | 'failed' = 'completed', value = '"ok"') =>
    new Promise<Finished | undefined>((resolve) => {
      const error = outcome === 'failed' ? new Error(value) : undefined;
      finisher.send(r, finisher.request(r, outcome, value, -1, error, 5), error, (run, request, finished, err) => {
        finisher.settle(request);
        finisher.apply(run, request, finished, err);
        resolve(finished);
      });
    });
  return { finisher, calls, log, errors, ledger, run, finish };
}

/** The job ids of a glidemq_finishMany call (7 arguments before the jobs, 7 per job). */
const batchIds = (args: unknown[]) => args.slice(7).filter((_, i) => i % 7 === 0);

describe('Worker finisher (no server)', () => {
  it('results ready together: with no call in flight half go in one glidemq_finishMany; with one in flight, all that is ready goes in the next', async () => {
    const { finisher, calls, log, ledger, run, finish } = fakeFinisher();
    ledger.fetchCount = 1;
    const done = ['a', 'b', 'c', 'd'].map((id) => finish(run(id)));
    expect(ledger.inbound, 'the next jobs asked for count as on their way').to.equal(4);
    await waitFor(() => calls.length === 1, 'the first batch');
    expect(calls[0].fn).to.equal('glidemq_finishMany');
    expect(calls[0].args.slice(0, 3), 'consumer, jobs, next jobs asked for').to.deep.equal(['me', 2, 2]);
    expect(batchIds(calls[0].args)).to.deep.equal(['a', 'b']);
    done.push(finish(run('e')));
    await waitFor(() => calls.length === 2, 'the second batch, while the first is in flight');
    expect(calls[1].args.slice(0, 3)).to.deep.equal(['me', 3, 3]);
    expect(batchIds(calls[1].args)).to.deep.equal(['c', 'd', 'e']);
    // each job's status in argument order, then the next jobs: each finish gets its share
    calls[0].answer(['completed', 'completed', claim('n1'), claim('n2')]);
    calls[1].answer(['completed', 'completed', 'completed', claim('n3')]);
    const finished = await Promise.all(done);
    expect(finished.map((f) => f!.next.map((c) => String(c[0])))).to.deep.equal([['n1'], ['n2'], ['n3'], [], []]);
    expect(log.filter((l) => l.startsWith('dispatch'))).to.deep.equal(['dispatch n1:1', 'dispatch n2:1', 'dispatch n3:1']);
    expect(finisher.finished).to.deep.equal({ completed: 5, failed: 0 });
    expect(ledger.inbound).to.equal(0);
    expect(calls).to.have.length(2);
  });

  it('the calls share what the worker circulates: each asks for its share of next jobs whatever its results asked, the rest waits with the results not sent', async () => {
    // 8 jobs circulate: two calls in flight, of 4 jobs each
    const { calls, ledger, run, finish } = fakeFinisher({ circulating: () => 8, slotsShort: () => 0 });
    // the first result of a turn asks for what the slots and the prefetch lack, the others for none
    ledger.fetchCount = 6;
    const done = [finish(run('a'))];
    ledger.fetchCount = 0;
    done.push(...['b', 'c', 'd', 'e', 'f'].map((id) => finish(run(id))));
    expect(ledger.inbound).to.equal(6);
    await waitFor(() => calls.length === 1, 'the first call');
    expect(calls[0].args.slice(0, 3), 'half the results, asking for a call\'s share').to.deep.equal(['me', 3, 4]);
    expect(batchIds(calls[0].args)).to.deep.equal(['a', 'b', 'c']);
    calls[0].answer(['completed', 'completed', 'completed', claim('n1'), claim('n2'), claim('n3'), claim('n4')]);
    await waitFor(() => calls.length === 2, 'the results kept back, once the reply is in');
    expect(calls[1].args.slice(0, 3), 'they ask for the rest').to.deep.equal(['me', 3, 2]);
    calls[1].answer(['completed', 'completed', 'completed', claim('n5'), claim('n6')]);
    const finished = await Promise.all(done);
    expect(finished.map((f) => f!.next.length), 'the claims go with the results that asked for them').to.deep.equal([4, 0, 0, 2, 0, 0]);
    expect(ledger.inbound, 'each finish took back what it asked in the end').to.equal(0);
  });

  it('a call carries at most its share of the results; a reply that comes while another call is in flight sends only full calls before its next jobs run', async () => {
    const { calls, log, ledger, run, finish } = fakeFinisher({ circulating: () => 8, slotsShort: () => 0 });
    ledger.fetchCount = 1;
    const first = finish(run('a'));
    await waitFor(() => calls.length === 1, 'a call in flight');
    const done = ['b', 'c', 'd', 'e', 'f', 'g'].map((id) => finish(run(id)));
    await waitFor(() => calls.length === 2, 'the second call');
    expect(calls[1].args.slice(0, 3), 'one call\'s share; two are in flight').to.deep.equal(['me', 4, 4]);
    expect(batchIds(calls[1].args)).to.deep.equal(['b', 'c', 'd', 'e']);
    calls[0].answer(['completed', claim('n1')]);
    await first;
    expect(log, 'the reply\'s next job is handed on').to.include('dispatch n1:1');
    expect(calls, 'before the two results left, which make no full call').to.have.length(2);
    await waitFor(() => calls.length === 3, 'the rest, at the end of the turn');
    expect(calls[2].args.slice(0, 3)).to.deep.equal(['me', 2, 2]);
    expect(batchIds(calls[2].args)).to.deep.equal(['f', 'g']);
    calls[1].answer(['completed', 'completed', 'completed', 'completed', claim('n2'), claim('n3'), claim('n4'), claim('n5')]);
    calls[2].answer(['completed', 'completed', claim('n6'), claim('n7')]);
    await Promise.all(done);
    expect(ledger.inbound).to.equal(0);
  });

  it('the next claims of a reply are handed on after the outcome, marked ahead for a prefetch; a newer claim of the same job comes last', async () => {
    const { calls, log, ledger, run, finish } = fakeFinisher();
    ledger.fetchCount = 3;
    ledger.prefetch = 1;
    const r = run('a', '1');
    const done = finish(r);
    await waitFor(() => calls.length === 1, 'the finish call');
    expect(calls[0].fn).to.equal('glidemq_finish');
    const [id, fence, consumer, outcome, value, retryDelay, fetchCount] = calls[0].args;
    expect([id, fence, consumer, outcome, value, retryDelay, fetchCount]).to.deep.equal(['a', '1', 'me', 'completed', '"ok"', -1, 3]);
    expect(calls[0].args[9], 'the next jobs come marked not started').to.equal('1');
    // the reply fetched job a itself again: a reclaim had put it back while it ran
    calls[0].answer(['completed', claim('n1'), claim('a', '2'), claim('n2')]);
    await done;
    expect(log).to.deep.equal(['completed a', 'dispatch n1:1 ahead', 'dispatch n2:1 ahead', 'dispatch a:2 ahead', 'freed']);
    expect(r.job.state).to.equal('completed');
    expect(r.job.returnvalue).to.equal('ok');
    expect(r.job.attemptsMade).to.equal(1);
  });

  it("'stale' with no newer claim here: a newer fence holds the job elsewhere, so the run is lost and nothing is counted", async () => {
    const { finisher, calls, log, run, finish } = fakeFinisher();
    const r = run('a', '4');
    const done = finish(r);
    await waitFor(() => calls.length === 1, 'the finish call');
    calls[0].answer(['stale']);
    await done;
    expect(calls).to.have.length(1);
    expect(log).to.deep.equal(['lost a', 'freed']);
    expect(finisher.finished).to.deep.equal({ completed: 0, failed: 0 });
    expect(r.job.attemptsMade).to.equal(0);
  });

  it("'stale' and the reply brings the job back under a newer fence: the outcome is sent again under it, asking for no next jobs", async () => {
    const { calls, log, ledger, run, finish } = fakeFinisher();
    ledger.fetchCount = 1;
    const r = run('a', '1');
    const done = finish(r);
    await waitFor(() => calls.length === 1, 'the first finish');
    calls[0].answer(['stale', claim('a', '3'), claim('n1')]);
    await waitFor(() => calls.length === 2, 'the finish under the newer claim');
    expect(calls[1].args.slice(0, 2)).to.deep.equal(['a', '3']);
    expect(calls[1].args[6], 'no next jobs: the first reply had them').to.equal(0);
    calls[1].answer(['completed']);
    await done;
    expect(r.job.claim!.fence).to.equal('3');
    expect(log).to.deep.equal(['completed a', 'dispatch n1:1', 'freed']);
  });

  it("'stale' while a newer claim of the job waits as the run's next: the outcome goes under that claim", async () => {
    const { calls, log, run, finish } = fakeFinisher();
    const r = run('a', '1');
    r.next = claim('a', '2'); // a reclaim gave the job back here while its finish was on its way
    const done = finish(r);
    await waitFor(() => calls.length === 1, 'the first finish');
    expect(calls[0].args.slice(0, 2)).to.deep.equal(['a', '1']);
    calls[0].answer(['stale']);
    await waitFor(() => calls.length === 2, 'the finish under the newer claim');
    expect(calls[1].args.slice(0, 2)).to.deep.equal(['a', '2']);
    calls[1].answer(['completed']);
    await done;
    expect(log).to.deep.equal(['completed a', 'freed']);
  });

  it("a batch's finishes (finishRuns): one call for them all, not halved; each job applied by its own reply, a refused or 'stale' one going on alone; the slots freed once for the batch", async () => {
    const { finisher, calls, log, ledger, run } = fakeFinisher();
    ledger.fetchCount = 1;
    const runs = [run('a'), run('b'), run('c', '1'), run('d')];
    const requests = runs.map((r) => finisher.request(r, 'completed', '"ok"', -1, undefined, 5));
    expect(ledger.inbound).to.equal(4);
    const done = finisher.finishRuns(runs, requests, (i, finished, freesSlot) => finisher.apply(runs[i], requests[i], finished, undefined, freesSlot));
    await waitFor(() => calls.length === 1, 'the batch call');
    expect(calls[0].fn).to.equal('glidemq_finishMany');
    expect(calls[0].args.slice(0, 3), 'consumer, all four jobs at once, next jobs asked for').to.deep.equal(['me', 4, 4]);
    expect(batchIds(calls[0].args)).to.deep.equal(['a', 'b', 'c', 'd']);
    // a completed, b refused alone, c stale and fetched again under a newer fence (a reclaim put it
    // back while it ran), d completed; one next job each for a, b and c
    calls[0].answer(['completed', new Error('ERR_INVALID the value of job b is refused'), 'stale', 'completed', claim('n1'), claim('n2'), claim('c', '2')]);
    await waitFor(() => calls.length === 2, 'the first finish sent again alone');
    expect(ledger.inbound, 'the next jobs came with the reply').to.equal(0);
    expect(log, 'a and d applied, the slots freed once for them').to.deep.equal(['completed a', 'dispatch n1:1', 'completed d', 'freed']);
    const answerAlone = (c: Call) => c.answer([String(c.args[0]) === 'b' ? 'failed' : 'completed']);
    answerAlone(calls[1]);
    await waitFor(() => calls.length === 3, 'the second finish sent again alone');
    answerAlone(calls[2]);
    await done;
    expect(calls.slice(1).map((c) => c.args.slice(0, 2))).to.have.deep.members([['b', '1'], ['c', '2']]);
    expect(calls.slice(1).map((c) => c.args[6]), 'no next jobs asked for again').to.deep.equal([0, 0]);
    expect(log.slice(4)).to.have.members(['failed b', 'dispatch n2:1', 'freed', 'completed c', 'freed']);
    expect(finisher.finished).to.deep.equal({ completed: 3, failed: 1 });
    expect(runs[2].job.claim!.fence).to.equal('2');
    expect(runs[1].job.failedReason).to.match(/job b: glidemq refused to store its completed outcome/);
  });

  it("a run's end that throws (send's done) is reported, and the other finishes of its call still end once each", async () => {
    const { finisher, calls, errors, ledger, run } = fakeFinisher();
    ledger.fetchCount = 0;
    const ended: string[] = [];
    const send = (r: Run, fail: boolean) => {
      finisher.send(r, finisher.request(r, 'completed', 'null', -1, undefined, 1), undefined, (run, request, finished) => {
        finisher.settle(request);
        ended.push(`${run.job.id} ${String(finished?.reply[0])}`);
        if (fail) throw new Error(`the end of ${run.job.id} threw`);
      });
    };
    // one call in flight first, so that a and b go together in the next
    send(run('x'), false);
    await waitFor(() => calls.length === 1, 'the first call');
    send(run('a'), true);
    send(run('b'), false);
    await waitFor(() => calls.length === 2, 'the call of a and b, while the first is in flight');
    expect(batchIds(calls[1].args)).to.deep.equal(['a', 'b']);
    calls[0].answer(['completed']);
    calls[1].answer(['completed', 'completed']);
    await waitFor(() => ended.length === 3, 'every end');
    expect(ended).to.deep.equal(['x completed', 'a completed', 'b completed']);
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['the end of a threw']);
  });

  it('a failed call: the error is reported, the claim is left to stalled recovery, the slot is freed', async () => {
    const { calls, log, errors, run, finish } = fakeFinisher();
    const done = finish(run('a'));
    await waitFor(() => calls.length === 1, 'the finish call');
    calls[0].fail(new Error('connection is closed'));
    expect(await done).to.equal(undefined);
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['connection is closed']);
    expect(log).to.deep.equal(['freed']);
  });
});
