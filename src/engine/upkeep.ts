/**
 * The feature housekeeping a worker's promotion tick runs after promotion: metrics trimming, the
 * dedup sweep, and firing due schedulers. One function call per tick when nothing is due; a second
 * one (glidemq_fireSchedulers) when something is.
 */
import type { Client } from './connection.js';
import type { QueueKeys } from './keys.js';
import { callFunction } from './library.js';
import { nextRunAfter, parseRecord } from './schedulers.js';

export interface UpkeepResult {
  metricsTrimmed: number;
  dedupRemoved: number;
  /** Schedulers this tick fired: name and the id of the job added. */
  fired: { scheduler: string; jobId: string }[];
  /** When the next scheduler is due (ms since epoch), or -1 when none is. */
  nextDue: number;
}

export class Upkeep {
  constructor(
    private readonly client: () => Client,
    private readonly keys: QueueKeys,
    private readonly now: () => number,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  async onPromotionTick(): Promise<UpkeepResult> {
    const now = this.now();
    const r = (await callFunction(this.client(), 'glidemq_upkeep', this.keys.meta, [now])) as (string | number)[];
    const result: UpkeepResult = { metricsTrimmed: Number(r[0]), dedupRemoved: Number(r[1]), fired: [], nextDue: Number(r[2]) };
    const triples: (string | number)[] = [];
    for (let i = 3; i + 1 < r.length; i += 2) {
      try {
        const rec = parseRecord(String(r[i + 1]));
        // the next slot after now, not after the missed one: downtime fires one run, not a backlog
        const next = nextRunAfter(rec, Math.max(now, rec.nextRun));
        triples.push(String(r[i]), rec.nextRun, next);
      } catch (err) {
        this.onError(err); // one unreadable scheduler must not stop the others
      }
    }
    if (triples.length === 0) return result;
    const fired = (await callFunction(this.client(), 'glidemq_fireSchedulers', this.keys.meta, [now, ...triples])) as string[];
    for (let i = 0; i + 1 < fired.length; i += 2) if (fired[i + 1]) result.fired.push({ scheduler: fired[i], jobId: fired[i + 1] });
    for (let i = 2; i < triples.length; i += 3) {
      const next = Number(triples[i]);
      if (result.nextDue < 0 || next < result.nextDue) result.nextDue = next;
    }
    return result;
  }
}
