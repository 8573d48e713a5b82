/**
 * Storing jobs brought from elsewhere, each in the state it had there (lua/restore.lua,
 * glidemq_restore): the client side of `glidemq import-bullmq`'s writes. A job whose id exists is
 * not written again, so an import run twice stores each job once.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import type { QueueKeys } from '../shared/keys.js';

export type RestoredState = 'waiting' | 'prioritized' | 'delayed' | 'completed' | 'failed';

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
}

/** Jobs per call: every job's arguments travel in one call, checked whole before the first write. */
const RESTORE_BATCH = 200;

function argsOf(r: RestoreRecord): (string | number)[] {
  return [
    r.id, r.state, r.name, r.data, r.runAt, r.priority, r.attempts, r.attemptsMade, r.opts, r.value,
    r.stacktrace.length ? JSON.stringify(r.stacktrace) : '', r.processedOn, r.finishedOn,
    r.logs.length ? JSON.stringify(r.logs) : '',
  ];
}

/** Stores `records`; resolves to the ids written (an id that existed is left as it was and not listed). */
export async function restoreJobs(client: Client, keys: QueueKeys, records: RestoreRecord[]): Promise<Set<string>> {
  const stored = new Set<string>();
  for (let at = 0; at < records.length; at += RESTORE_BATCH) {
    const batch = records.slice(at, at + RESTORE_BATCH);
    const reply = (await callFunction(client, 'glidemq_restore', keys.meta, [batch.length, ...batch.flatMap(argsOf)])) as unknown[];
    for (let i = 0; i + 1 < reply.length; i += 2) {
      if (Number(reply[i + 1]) === 1) stored.add(String(reply[i]));
    }
  }
  return stored;
}
