/** The time limit of one run (src/engine/consuming/run-timer.ts), without a server. */
import { expect } from 'chai';
import { RunTimer } from '../../src/engine/consuming/run-timer.js';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('RunTimer (no server)', () => {
  it('a run that settles within its limit: its value, no abort, no timer left', async () => {
    const told: string[] = [];
    const t = new RunTimer(1_000, 1_000, () => told.push('timeout'), () => told.push('stuck'));
    expect(await t.guard(Promise.resolve('done'))).to.equal('done');
    expect(await t.guard('sync value')).to.equal('sync value');
    await t.guard(Promise.reject(new Error('boom'))).then(
      () => expect.fail('resolved'),
      (err: Error) => expect(err.message).to.equal('boom'),
    );
    expect(told).to.deep.equal([]);
    expect(t.reason).to.equal(undefined);
  });

  it('at the limit the abort is told the reason; a processor that settles within the grace settles the guard', async () => {
    const aborted = deferred<Error>();
    const t = new RunTimer(20, 1_000, (reason) => aborted.resolve(reason), () => expect.fail('stuck'));
    const work = deferred<string>();
    const guarded = t.guard(work.promise);
    const reason = await aborted.promise;
    expect(reason.message).to.equal('timed out after 20 ms');
    expect(t.reason).to.equal(reason);
    work.resolve('late but within the grace');
    expect(await guarded).to.equal('late but within the grace');
    expect(t.stuck).to.equal(false);
  });

  it('a processor still running after the grace: the guard rejects with the reason, onStuck learns when it finally returns, its result is dropped', async () => {
    // (wrapped: a promise resolved with a promise would wait for it)
    const stuck = deferred<{ returned: Promise<void> }>();
    const t = new RunTimer(10, 20, () => undefined, (returned) => stuck.resolve({ returned }));
    const work = deferred<string>();
    const guarded = t.guard(work.promise);
    const err = await guarded.then(() => expect.fail('resolved'), (e: Error) => e);
    expect(err.message).to.equal('timed out after 10 ms');
    expect(t.stuck).to.equal(true);
    const { returned } = await stuck.promise;
    let back = false;
    void returned.then(() => (back = true));
    await new Promise((r) => setImmediate(r));
    expect(back, 'not before the processor returns').to.equal(false);
    work.resolve('dropped');
    await returned;
    expect(back).to.equal(true);
  });
});
