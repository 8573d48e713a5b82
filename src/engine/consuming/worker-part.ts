/**
 * What every part of a Worker gets from it (the read loop, prefetch buffer, runner, finisher, lock
 * keeper and promoter): a small view, never the Worker itself. Built once per worker.
 */
import type { Client } from '../connecting/connection.js';
import type { QueueKeys } from '../shared/keys.js';
import type { Settings } from './worker-options.js';

export interface WorkerPart {
  /** The command connection (a Cluster client once the worker found a cluster node). */
  client(): Client;
  keys: QueueKeys;
  /** This worker's consumer name: the owner of its claims. */
  consumer: string;
  settings: Settings;
  /**
   * The terms every claim this worker makes records on the server: lockDuration and maxStalledCount
   * (lua/activate.lua).
   */
  claimTerms: [number, number];
  /** The worker runs and is not closing. */
  live(): boolean;
  /** Emits a public event on the Worker. */
  emit(event: string, ...args: unknown[]): void;
  /** Reports an error as the Worker's `error` event (when anyone listens). */
  emitError(err: unknown): void;
}
