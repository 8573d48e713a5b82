/**
 * The Worker's lock keeper without a server: its heartbeat timer extends the locks of what the
 * worker holds, a lost claim is reported (lockLost) and taken from its run or the prefetch, and
 * the stalled check renews this worker's own locks before it recovers anyone's. The keeper is
 * wired to a real runner and prefetch buffer as the Worker wires it; a fake client answers.
 */
import { expect } from 'chai';
import type { Client } from '../../src/engine/connecting/connection.js';
import type { ClaimReply, Job } from '../../src/engine/jobs/job.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { STALLED_REASON, type Maintenance, type ReclaimResult } from '../../src/engine/administering/maintenance.js';
import { resolveSettings, type WorkerOptions } from '../../src/engine/consuming/worker-options.js';
import { LockKeeper } from '../../src/engine/consuming/worker-lock-keeper.js';
import { PrefetchBuffer } from '../../src/engine/consuming/worker-prefetch.js';
import { Runner, type RunFinisher } from '../../src/engine/consuming/worker-runner.js';
import type { WorkerPart } from '../../src/engine/consuming/worker-part.js';
import { waitFor } from '../helpers/valkey.js';

const claim = (id: string, fence: string) => [id, fence, 'job', '{}', '1000', '{}'] as unknown as ClaimReply;

/**
 * A lock keeper over a fake client (glidemq_extendLocks answers `lost`), a runner and a prefetch
 * buffer; `log` holds the calls made and the events told, in order.
 */
function fakeKeeper(opts: WorkerOptions, reclaim: () => Promise<Partial<ReclaimResult>> = async () => ({})) {
  const log: unknown[][] = [];
  const state = { status: 'ready', statusReads: 0, lost: [] as string[], fail: false };
  const client = {
    get status() {
      state.statusReads++;
      return state.status;
    },
    fcall: async (fn: string, _n: number, _key: string, ...args: unknown[]) => {
      log.push([fn, ...args]);
      if (state.fail) throw new Error('connection is closed');
      return state.lost;
    },
  } as unknown as Client;
  const part: WorkerPart = {
    client: () => client,
    keys: new QueueKeys('lock-keeper-unit', 'glide'),
    consumer: 'me',
    settings: resolveSettings(opts),
    claimTerms: [30_000, 1],
    live: () => true,
    // (the runs' `active` events are left out)
    emit: (event, ...args) => void (event === 'active' || log.push([event, ...args])),
    emitError: (err) => void log.push(['error', (err as Error).message]),
  };
  // a processor that runs until the test ends it, with a signal the runner aborts
  const endRuns: (() => void)[] = [];
  const runner = new Runner(
    { ...part, wasMarked: () => false, noteRun: () => undefined, finisher: {} as RunFinisher, fetchOne: async () => undefined, afterSlotFreed: () => undefined },
    (_job: Job, _token?: string, _signal?: AbortSignal) => new Promise((resolve) => endRuns.push(() => resolve('done'))),
  );
  const buffer = new PrefetchBuffer({
    ...part,
    processing: () => runner.processing(),
    reserved: () => 0,
    limited: () => false,
    rttMs: () => 0,
    paused: () => false,
    closing: () => false,
    start: () => undefined,
  });
  const maintenance = {
    reclaimStalled: async (consumer: string) => {
      log.push(['reclaimStalled', consumer]);
      return { redispatched: [], failed: [], returned: [], consumersRemoved: 0, failedJobs: [], ...(await reclaim()) };
    },
  } as unknown as Maintenance;
  const keeper = new LockKeeper({
    ...part,
    maintenance: () => maintenance,
    held: (into) => [runner, buffer].forEach((holder) => holder.collectHeld(into)),
    lose: (id, fence) => runner.lose(id, fence) ?? buffer.lose(id, fence),
  });
  const stop = () => {
    keeper.stopHeartbeat();
    keeper.stopStalledCheck();
  };
  return { keeper, runner, buffer, log, state, stop };
}

describe('Worker lock keeper (no server)', () => {
  it('the heartbeat runs every lockDuration / 2 and extends the locks of the running and the prefetched claims', async () => {
    const { keeper, runner, buffer, log, stop } = fakeKeeper({ lockDuration: 200, stalledInterval: 60_000 });
    try {
      expect(await keeper.heartbeat(), 'nothing held: no call').to.equal(true);
      expect(log).to.deep.equal([]);
      runner.start(runner.jobOf(claim('a', '3')));
      buffer.keep(runner.jobOf(claim('p', '8')));
      keeper.start();
      await waitFor(() => log.length >= 2, 'two heartbeats');
      expect(log.slice(0, 2)).to.deep.equal([
        ['glidemq_extendLocks', 'me', 'a', '3', 'p', '8'],
        ['glidemq_extendLocks', 'me', 'a', '3', 'p', '8'],
      ]);
    } finally {
      stop();
    }
  });

  it("a lost claim is reported once (lockLost): a running job's signal is aborted, a prefetched one never starts here", async () => {
    const { keeper, runner, buffer, log, state, stop } = fakeKeeper({ lockDuration: 60_000, stalledInterval: 60_000 });
    try {
      runner.start(runner.jobOf(claim('a', '3')));
      runner.start(runner.jobOf(claim('b', '4')));
      buffer.keep(runner.jobOf(claim('p', '8')));
      const signal = runner.active.get('a')!.abort!.signal;
      state.lost = ['a', 'p'];
      expect(await keeper.heartbeat()).to.equal(true);
      expect(log.slice(1).map((e) => e.slice(0, 2))).to.deep.equal([['lockLost', 'a'], ['lockLost', 'p']]);
      expect(signal.aborted).to.equal(true);
      expect(runner.active.get('b')!.abort!.signal.aborted).to.equal(false);
      expect(buffer.jobs.has('p')).to.equal(false);
      // the processor of 'a' ignores its abort and runs on: its lost claim is renewed no more, nor told again
      state.lost = ['a'];
      expect(await keeper.heartbeat()).to.equal(true);
      expect(log.slice(3), 'the lost and the dropped claims are held no more').to.deep.equal([['glidemq_extendLocks', 'me', 'b', '4']]);
    } finally {
      stop();
    }
  });

  it("the stalled check renews this worker's locks first, then recovers, and tells what it found", async () => {
    const found = { failed: ['x'], redispatched: ['y'], failedJobs: [['name', 'job', 'data', '{}', 'attemptsMade', '2']] };
    const { runner, keeper, log, stop } = fakeKeeper({ lockDuration: 60_000, stalledInterval: 30 }, async () => found);
    try {
      runner.start(runner.jobOf(claim('a', '3')));
      keeper.startStalledCheck();
      await waitFor(() => log.some((e) => e[0] === 'failed'), 'the stalled check');
      stop();
      expect(log.slice(0, 4).map((e) => e.slice(0, 3))).to.deep.equal([
        ['glidemq_extendLocks', 'me', 'a'],
        ['reclaimStalled', 'me'],
        ['stalled', 'x', 'active'],
        ['stalled', 'y', 'active'],
      ]);
      expect(log.slice(2, 4).map((e) => e[3])).to.deep.equal(['failed', 'redispatched']);
      const failed = log.find((e) => e[0] === 'failed')!;
      const job = failed[1] as Job;
      expect([job.id, job.state, job.failedReason, job.attemptsMade]).to.deep.equal(['x', 'failed', STALLED_REASON, 2]);
      expect((failed[2] as Error).message).to.equal(STALLED_REASON);
    } finally {
      stop();
    }
  });

  it('no stalled check while the connection is down, and none after a heartbeat that failed (its error is reported)', async () => {
    const { runner, keeper, log, state, stop } = fakeKeeper({ lockDuration: 60_000, stalledInterval: 20 });
    try {
      runner.start(runner.jobOf(claim('a', '3')));
      state.status = 'reconnecting';
      keeper.startStalledCheck();
      await waitFor(() => state.statusReads >= 2, 'two checks to look at the connection');
      expect(log, 'nothing sent while the connection is down').to.deep.equal([]);
      state.fail = true;
      state.status = 'ready';
      await waitFor(() => log.some((e) => e[0] === 'error'), 'a failed heartbeat');
      stop();
      expect(log.some((e) => e[0] === 'reclaimStalled'), 'no recovery after a failed heartbeat').to.equal(false);
      expect(log.find((e) => e[0] === 'error')).to.deep.equal(['error', 'connection is closed']);
    } finally {
      stop();
    }
  });
});
