/**
 * The Worker's prefetch buffer and slot ledger: the claims taken ahead of the slots wait here for
 * one, and this is the one place that counts what a worker holds (running, prefetched, on its way)
 * to say how many more claims a read, a fetch or a finish may take.
 */
import type { Job } from '../jobs/job.js';
import { callFunction } from '../connecting/library.js';
import type { WorkerPart } from './worker-part.js';
import type { FetchShaper } from './finish-batch.js';
import { newerFence } from './worker-runner.js';

/**
 * The adaptive prefetch holds at most this many jobs per slot. A slot's next job starts when its
 * result leaves, and the claims in a worker then circulate once per round trip: to be k times
 * faster than a worker that keeps one call in flight per slot, k slots' worth must circulate. The
 * round trip measured grows with the batch a call carries, so for jobs much shorter than a round
 * trip the cap is what decides; it is also what sizes the batches, and a batch of ~40 jobs costs
 * the server ~10% less per job than one of ~15 and the worker about as much less (make bench:
 * 8 per slot against 2 at concurrency 10 gave 14% more jobs/s on loopback). The worker's finish
 * calls share what it circulates (finish-batch.ts: at least two calls, of up to 100 jobs each):
 * 16 per slot makes them two of ~85 at concurrency 10 instead of two of 45, for 6% more jobs/s on
 * loopback and 30% more through a 1 ms round trip (alternating runs, medians of 10).
 */
export const PREFETCH_CAP = 16;

/**
 * ...and at most this many bytes of job data (an average job's times the jobs held ahead). A large
 * job costs its worker more outside the processor (its reply read, its data decoded) than the run
 * time that sizes the prefetch shows, and held ahead it only makes replies larger (make bench,
 * scale rows at 100 KiB per job: ~1.0x BullMQ's rate with 10 held ahead, 1.3-1.6x with none).
 */
export const PREFETCH_BYTES = 64 * 1024;

/** What the prefetch buffer needs from its worker. */
export interface PrefetchHost extends WorkerPart {
  /** Runs whose processor runs now (the runner). */
  processing(): number;
  /** Claims the blocking read may deliver now (the read loop). */
  reserved(): number;
  /** The queue has a global limit or a rate limiter: no claim is held ahead (the read loop). */
  limited(): boolean;
  /** The round trip of a finish call, ms (the finisher; 0 until one returned). */
  rttMs(): number;
  /** pause() on this worker alone. */
  paused(): boolean;
  /** close() began. */
  closing(): boolean;
  /** Runs a job on a free slot (the runner). */
  start(job: Job): void;
}

export class PrefetchBuffer<J extends Job = Job> {
  /**
   * Prefetched claims waiting for a slot, by job id in the order they came (heartbeated like
   * running jobs, given back at close). A Map: hundreds may wait, and every claim looks itself up.
   */
  readonly jobs = new Map<string, J>();
  /** Next jobs asked for by finishes whose replies have not come back yet. */
  inbound = 0;
  /** How long a processor run takes, ms (an average weighted to the recent; sizes the prefetch). */
  private runMs = 0;
  /** Data bytes a claimed job carries (an average weighted to the recent; bounds the prefetch). */
  private jobBytes = 0;

  constructor(private readonly host: PrefetchHost) {}

  /** A processor run took `ms`. */
  noteRun(ms: number): void {
    this.runMs = this.runMs === 0 ? ms : this.runMs + 0.1 * (ms - this.runMs);
  }

  /** A claimed job carried `bytes` of data. */
  noteBytes(bytes: number): void {
    this.jobBytes = this.jobBytes === 0 ? bytes : this.jobBytes + 0.1 * (bytes - this.jobBytes);
  }

  /**
   * Jobs claimed ahead of the slots. The `prefetch` option fixes it; by default it is as many as
   * the slots run during one round trip of a finish call (concurrency x round trip / run time), at
   * most PREFETCH_CAP x concurrency: across a network a slot then starts its next job when its
   * result leaves, not when the reply comes back. Jobs that run longer than a round trip per slot
   * get none, so nothing is held back from other workers, and neither does a queue with a global
   * limit or a rate limiter (a claim held ahead would count against them). A batch worker holds
   * at least one round of batches ahead (concurrency x batch.size jobs, within the byte cap).
   */
  prefetchNow(): number {
    const host = this.host;
    const fixed = host.settings.prefetch;
    if (fixed !== undefined) return fixed;
    if (host.limited()) return 0;
    const c = host.settings.concurrency;
    const bySize = Math.floor(PREFETCH_BYTES / Math.max(this.jobBytes, 1));
    // A batch worker claims its next round of batches while the current one runs, however long it
    // runs (and before its first round trip is known): its slots start together, so a prefetch
    // sized by run time (none for a batch slower than a round trip) would leave the server idle
    // while the processor runs, and the processor idle while the server claims the next batch.
    const batchAhead = host.settings.batch ? Math.min(c, bySize) : 0;
    const rtt = host.rttMs();
    if (rtt === 0) return batchAhead;
    return Math.max(batchAhead, Math.min(PREFETCH_CAP * c, bySize, Math.floor((c * rtt) / Math.max(this.runMs, 0.05))));
  }

  /** Claims this worker can still take: running slots plus the prefetch allowance. */
  freeSlots(): number {
    return this.room(this.prefetchNow());
  }

  /**
   * Claims the blocking read and fetches may take: the free slots, and the prefetch room only
   * when a fixed prefetch was asked for. An adaptive prefetch is filled by finishes alone, whose
   * next jobs come in queue order (priority first): a read of the job stream that filled it
   * would take FIFO jobs ahead of priority ones that arrive meanwhile.
   */
  readerRoom(): number {
    return this.room(this.host.settings.prefetch ?? 0);
  }

  /** Claims that fill the slots and `ahead` more, less those held, running or on their way. */
  room(ahead: number): number {
    const host = this.host;
    if (host.paused()) return 0;
    return host.settings.concurrency + ahead - host.processing() - this.jobs.size - this.inbound - host.reserved();
  }

  /**
   * How many jobs a finish asks for: what fills the slots and the prefetch room, less what is on
   * its way.
   */
  nextFetchCount(): number {
    if (!this.host.live() || this.host.paused()) return 0;
    return Math.max(0, this.freeSlots());
  }

  /**
   * Sizes the calls of finishes (finish-batch.ts FetchShaper): the calls in flight share the jobs
   * the worker circulates, each asking for about as many next jobs as the others.
   */
  readonly shaper: FetchShaper = {
    circulating: () => this.host.settings.concurrency + this.prefetchNow(),
    slotsShort: (pendingAsked) => {
      const host = this.host;
      return host.settings.concurrency - host.processing() - this.jobs.size - (this.inbound - pendingAsked) - host.reserved();
    },
  };

  /** Starts waiting claims, in the order they came, on the free slots. */
  startBuffered(): void {
    const host = this.host;
    for (const [id, job] of this.jobs) {
      if (host.processing() >= host.settings.concurrency || host.closing() || host.paused()) break;
      this.jobs.delete(id);
      host.start(job);
    }
  }

  /**
   * Keeps a claim for a free slot. A prefetched job claimed again has not started: it waits under
   * its newest claim, in its place.
   */
  keep(job: J): void {
    const waiting = this.jobs.get(job.id);
    if (!waiting || newerFence(job.claim?.fence, waiting.claim?.fence)) this.jobs.set(job.id, job);
  }

  /** Whether claim `fence` of job `id` waits here. */
  holds(id: string, fence: string): boolean {
    return this.jobs.get(id)?.claim?.fence === fence;
  }

  drop(id: string, fence: string): void {
    if (this.jobs.get(id)?.claim?.fence === fence) this.jobs.delete(id);
  }

  /**
   * The server says claim `fence` of job `id` was lost: a prefetched job whose claim was lost
   * never starts here (it may run elsewhere already). False when it does not wait here under it.
   */
  lose(id: string, fence: string): boolean {
    if (!this.holds(id, fence)) return false;
    this.drop(id, fence);
    return true;
  }

  /** Adds the waiting claims to `held` (the heartbeat renews their locks). */
  collectHeld(held: Job[]): void {
    for (const job of this.jobs.values()) held.push(job);
  }

  /** Prefetched jobs that will not run here go back to the queue for other workers. */
  async release(): Promise<void> {
    const host = this.host;
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    if (jobs.length === 0) return;
    const pairs = jobs.flatMap((j) => [j.id, j.claim?.fence ?? '']);
    await callFunction(host.client(), 'glidemq_release', host.keys.meta, [host.consumer, ...pairs]).catch((err) => host.emitError(err));
  }
}
