/**
 * The Worker's promoter: makes delayed jobs waiting when they fall due (glidemq_promote), and on
 * the same tick runs the queue's upkeep (maintenance and upkeep ticks). It arms one timer: at the
 * regular promotionInterval, or earlier when the server says a delayed job is due sooner.
 */
import { callFunction } from '../connecting/library.js';
import type { Maintenance } from '../administering/maintenance.js';
import type { Upkeep } from '../administering/upkeep.js';
import type { WorkerPart } from './worker-part.js';

/**
 * Delayed jobs made waiting per glidemq_promote call. The server runs nothing else during a call:
 * 1,000 per call held it for about 14 ms when 100k jobs fell due at once (make bench, scale rows),
 * and 250 for 3 to 7 ms on a slower 2-CPU machine (about 13 to 30 µs a job); 150 keep a call under
 * about 5 ms there, and a full batch asks for the next one at once (a call's fixed cost, ~50 µs,
 * adds about 15 ms to the drain of 100k).
 */
export const PROMOTE_BATCH = 150;

/** What the promoter needs from its worker. */
export interface PromoterHost extends WorkerPart {
  /** Read on each tick: the worker replaces it once the server proves to be a cluster. */
  maintenance(): Maintenance;
  upkeep: Upkeep;
}

export class Promoter {
  private timer: NodeJS.Timeout | undefined;
  /** When the armed timer fires, on this process's monotonic clock (performance.now). */
  private at = 0;
  private promoting = false;
  /** The earliest due time a wake entry told while a promotion was in flight (performance.now). */
  private dueWhilePromoting = Infinity;
  private ticks = 0;

  constructor(private readonly host: PromoterHost) {}

  /** When the next promotion runs (performance.now), or undefined when none is armed. */
  get dueAt(): number | undefined {
    return this.timer === undefined ? undefined : this.at;
  }

  schedule(inMs: number): void {
    if (!this.host.live()) return;
    clearTimeout(this.timer);
    this.at = performance.now() + Math.max(0, inMs);
    this.timer = setTimeout(() => void this.promote(), Math.max(0, inMs));
  }

  /**
   * A wake entry said a job is due in `inMs`: promotion moves earlier for it, never later (the
   * regular tick still runs, for jobs scheduled by paths that write no wake entry).
   */
  promoteBy(inMs: number): void {
    const at = performance.now() + inMs;
    // a promotion in flight read the scheduled set maybe before this job: it ends by arming for
    // this
    if (this.promoting) this.dueWhilePromoting = Math.min(this.dueWhilePromoting, at);
    else if (this.timer === undefined || at < this.at) this.schedule(inMs);
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private async promote(): Promise<void> {
    const host = this.host;
    let next = host.settings.promotionInterval;
    this.promoting = true;
    this.dueWhilePromoting = Infinity;
    try {
      const r = (await callFunction(host.client(), 'glidemq_promote', host.keys.meta, [PROMOTE_BATCH])) as number[];
      // r[1] is relative to the server's clock (ms until the next delayed job is due): waited
      // out on this process's timer, it is right whatever this machine's clock says.
      if (r[0] >= PROMOTE_BATCH) next = 0;
      else if (r[1] >= 0) next = Math.min(next, r[1]);
      this.ticks++;
      await host.maintenance().onPromotionTick(this.ticks);
      // metrics trim, dedup sweep, schedulers; nextDueIn is relative to the server's clock, as r[1]
      const dueIn = (await host.upkeep.onPromotionTick()).nextDueIn;
      if (dueIn >= 0) next = Math.min(next, dueIn);
    } catch (err) {
      if (host.live()) host.emitError(err);
    }
    this.promoting = false;
    this.schedule(Math.min(next, this.dueWhilePromoting - performance.now()));
  }
}
