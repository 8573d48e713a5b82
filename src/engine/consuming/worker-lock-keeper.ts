/**
 * The Worker's lock keeper: renews the lock of every claim the worker holds (the heartbeat, every
 * lockDuration / 2), tells the worker of claims the server says it lost, and runs stalled recovery
 * every stalledInterval. Its calls are timer work, never per job.
 */
import { Job } from '../jobs/job.js';
import { callFunction } from '../connecting/library.js';
import { STALLED_REASON, type Maintenance } from '../administering/maintenance.js';
import type { WorkerPart } from './worker-part.js';

/** What the lock keeper needs from its worker. */
export interface LockKeeperHost extends WorkerPart {
  /** Read on each check: the worker replaces it once the server proves to be a cluster. */
  maintenance(): Maintenance;
  /**
   * Adds the claims whose locks to renew to `into`: runs whose finish is not on its way, and
   * prefetched claims.
   */
  held(into: Job[]): void;
  /**
   * The server says claim `fence` of job `id` was lost: aborts its run or drops it from the
   * prefetch. False when that is no news (the run finishes or runs under a newer claim already).
   */
  lose(id: string, fence: string): boolean;
  /**
   * The server says claim `fence` of job `id` was revoked (queue.revoke): aborts its run with
   * reason 'revoked', or marks it to fail unrun when it is prefetched. False when that is no news.
   */
  revoke?(id: string, fence: string): boolean;
}

export class LockKeeper {
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private stalledTimer: NodeJS.Timeout | undefined;
  /** Timer work still waiting for its reply: a dead connection must not pile up more of it. */
  private heartbeatInFlight: Promise<boolean> | undefined;
  private stalledBusy = false;

  constructor(private readonly host: LockKeeperHost) {}

  /** The stalled check's timer is armed (it may be stopped since). */
  get checking(): boolean {
    return this.stalledTimer !== undefined;
  }

  /** Heartbeat and stalled check, for a worker that runs its processor. */
  start(): void {
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), Math.max(50, Math.floor(this.host.settings.lockDuration / 2)));
    this.startStalledCheck();
  }

  /** The stalled check alone (a worker without a processor holds no claims of its own): once. */
  startStalledCheck(): void {
    this.stalledTimer ??= setInterval(() => void this.stalledTick(), this.host.settings.stalledInterval);
  }

  stopStalledCheck(): void {
    clearInterval(this.stalledTimer);
  }

  stopHeartbeat(): void {
    clearInterval(this.heartbeatTimer);
  }

  /**
   * Renews the lock of every claim held here; resolves false when the call failed. One at a time:
   * while one waits (a dead connection), the next tick joins it instead of piling up another.
   */
  heartbeat(): Promise<boolean> {
    this.heartbeatInFlight ??= this.extendLocks().finally(() => {
      this.heartbeatInFlight = undefined;
    });
    return this.heartbeatInFlight;
  }

  private async extendLocks(): Promise<boolean> {
    const host = this.host;
    const held: Job[] = [];
    host.held(held);
    if (held.length === 0) return true;
    const pairs = held.flatMap((j) => [j.id, j.claim?.fence ?? '']);
    try {
      // lockedAt becomes the server's now (lua/progress.lua): no clock of this process is sent
      const lost = (await callFunction(host.client(), 'glidemq_extendLocks', host.keys.meta, [host.consumer, ...pairs])) as (string | string[])[];
      // the claims revoked while they run come last, as one array (lua/progress.lua)
      const revoked = Array.isArray(lost[lost.length - 1]) ? (lost.pop() as string[]) : [];
      const sent = new Map(held.map((j, i) => [j.id, pairs[2 * i + 1]]));
      for (const id of revoked) {
        const fence = sent.get(id);
        if (fence !== undefined) host.revoke?.(id, fence);
      }
      // a claim lost is news only while the run it belongs to still runs under it
      for (const id of lost as string[]) {
        const fence = sent.get(id);
        if (fence !== undefined && host.lose(id, fence)) host.emit('lockLost', id);
      }
      return true;
    } catch (err) {
      if (host.live()) host.emitError(err);
      return false;
    }
  }

  /**
   * Stalled recovery. While the connection is down a check would wait in the client's queue and
   * could run, after the reconnect, before the heartbeat that re-asserts this worker's claims: it
   * is skipped then. Each check first renews this worker's own locks on the same connection, so
   * its own live claims are never stalled by it. (Other workers' checks count no time the server
   * was down against a claim: lua/epoch.lua.)
   */
  private async stalledTick(): Promise<void> {
    const host = this.host;
    if (this.stalledBusy || host.client().status !== 'ready') return;
    this.stalledBusy = true;
    try {
      if (!(await this.heartbeat())) return;
      const r = await host.maintenance().reclaimStalled(host.consumer);
      for (const id of r.failed) host.emit('stalled', id, 'active', 'failed');
      for (const id of r.redispatched) host.emit('stalled', id, 'active', 'redispatched');
      r.failedJobs.forEach((fields, i) => this.emitStalledFailure(r.failed[i], fields));
    } catch (err) {
      if (host.live()) host.emitError(err);
    } finally {
      this.stalledBusy = false;
    }
  }

  /**
   * A job this worker's stalled check failed for good (stored as a processor's failure is:
   * lua/outcomes.lua): `failed` (job, error, 'active') as for a job its processor failed, as
   * BullMQ's worker does for its stalled checker. `fields`: the job's hash as it was when it
   * stalled (its removeOnFail may have removed it since), given its outcome here.
   */
  private emitStalledFailure(id: string, fields: string[]): void {
    const job = Job.fromFields([...fields, 'id', id]);
    job.stalledCount++;
    job.state = 'failed';
    job.failedReason = STALLED_REASON;
    job.finishedOn = Date.now();
    this.host.emit('failed', job, new Error(STALLED_REASON), 'active');
  }
}
