/**
 * The feature housekeeping a worker's promotion tick runs after promotion: metrics trimming (and,
 * as they are added, dedup sweeping and firing due schedulers). One function call per tick when
 * there is nothing to do.
 */
import type { Client } from './connection.js';
import type { QueueKeys } from './keys.js';
import { callFunction } from './library.js';

export interface UpkeepResult {
  metricsTrimmed: number;
  dedupRemoved: number;
  /** When the next scheduler is due (ms since epoch), or -1 when none is. */
  nextDue: number;
}

export class Upkeep {
  constructor(
    private readonly client: () => Client,
    private readonly keys: QueueKeys,
    private readonly now: () => number,
  ) {}

  async onPromotionTick(): Promise<UpkeepResult> {
    const r = (await callFunction(this.client(), 'glidemq_upkeep', this.keys.meta, [this.now()])) as number[];
    return { metricsTrimmed: Number(r[0]), dedupRemoved: Number(r[1]), nextDue: -1 };
  }
}
