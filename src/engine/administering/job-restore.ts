/**
 * Storing jobs brought from elsewhere, each in the state it had there (lua/restore.lua,
 * glidemq_restore): the client side of `glidemq import-bullmq`'s writes. A job whose id exists is
 * not written again, so an import run twice stores each job once.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import type { QueueKeys } from '../shared/keys.js';

export type RestoredState = 'waiting' | 'prioritized' | 'delayed' | 'completed' | 'failed' | 'waiting-children';

/** A restored job's place in a flow (lua/restore.lua group.flow): links as glidemq job keys. */
export interface RestoredFlow {
  /** Its parents' job keys (its finish settles them). */
  parents?: string[];
  /** A waiting-children job's children not settled yet. */
  deps?: string[];
  /** Children that completed: job key -> return value (JSON text). */
  processed?: Record<string, string>;
  /** Children that failed and were ignored: job key -> failed reason. */
  ignored?: Record<string, string>;
  /** ms a waiting-children job waits once its children settled. */
  delay?: number;
}

/** The dedup id a restored job holds, as glidemq_add's dedup fields (lua/dedup.lua). */
export interface RestoredDedup {
  id: string;
  mode: 'simple' | 'throttle' | 'extend' | 'debounce';
  /** ms its window has left (0: no end). */
  ttl: number;
}

/** One job as glidemq_restore stores it (its header names each field's range). */
export interface RestoreRecord {
  id: string;
  state: RestoredState;
  name: string;
  /** The data as JSON text. */
  data: string;
  /** A delayed job's due time (ms since the epoch); 0 for the other states. */
  runAt: number;
  priority: number;
  attempts: number;
  attemptsMade: number;
  /** '' or the stored options as JSON text. */
  opts: string;
  /** completed: the return value as JSON text; failed: the failure's reason; else ''. */
  value: string;
  stacktrace: string[];
  processedOn: number;
  finishedOn: number;
  logs: string[];
  flow?: RestoredFlow;
  dedup?: RestoredDedup;
}

/** Jobs per call: every job's arguments travel in one call, checked whole before the first write. */
const RESTORE_BATCH = 200;

function argsOf(r: RestoreRecord): (string | number)[] {
  return [
    r.id, r.state, r.name, r.data, r.runAt, r.priority, r.attempts, r.attemptsMade, r.opts, r.value,
    r.stacktrace.length ? JSON.stringify(r.stacktrace) : '', r.processedOn, r.finishedOn,
    r.logs.length ? JSON.stringify(r.logs) : '',
    r.flow ? JSON.stringify(r.flow) : '', r.dedup?.id ?? '', r.dedup?.mode ?? '', r.dedup?.ttl ?? 0,
  ];
}

/**
 * Stores `records`; resolves to the ids written (an id that existed is left as it was and not
 * listed). `dedupTaken` (when given) gets the ids written whose dedup id was not recorded: an entry
 * for it stood already, pointing at another job.
 */
export async function restoreJobs(client: Client, keys: QueueKeys, records: RestoreRecord[], dedupTaken?: Set<string>): Promise<Set<string>> {
  const stored = new Set<string>();
  for (let at = 0; at < records.length; at += RESTORE_BATCH) {
    const batch = records.slice(at, at + RESTORE_BATCH);
    const reply = (await callFunction(client, 'glidemq_restore', keys.meta, [batch.length, ...batch.flatMap(argsOf)])) as unknown[];
    for (let i = 0; i + 1 < reply.length; i += 2) {
      const written = Number(reply[i + 1]);
      if (written >= 1) stored.add(String(reply[i]));
      if (written === 2) dedupTaken?.add(String(reply[i]));
    }
  }
  return stored;
}
