/**
 * The confirmed-writes chaos runs (issue 31, README "Durability"): producers add jobs until a crash
 * comes under load, then the test counts how many of the adds that were acknowledged (the call
 * resolved) are still there after the server comes back (a power cut) or after the replica is
 * promoted (a failover). One round: `lanes` producers add one job at a time each; after `cutAfter`
 * acknowledgements the crash is started while adds are in flight, and every add still in flight
 * is rejected by the connection's end (never counted as acknowledged).
 */
import { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import type { ConfirmOptions } from '../../src/engine/producing/confirm.js';
import { DEFAULT_PREFIX, QueueKeys } from '../../src/engine/shared/keys.js';

/** What one mode did over its rounds: adds started, acknowledged, and acknowledged but gone. */
export interface Tally {
  mode: string;
  rounds: number;
  attempted: number;
  acknowledged: number;
  lost: number;
}

export function emptyTally(mode: string): Tally {
  return { mode, rounds: 0, attempted: 0, acknowledged: 0, lost: 0 };
}

/** One line per mode, for the test's output and the README. */
export function tallyLine(t: Tally): string {
  return `${t.mode}: ${t.rounds} crash${t.rounds === 1 ? '' : 'es'}, ${t.attempted} adds attempted, ${t.acknowledged} acknowledged, ${t.lost} acknowledged and lost`;
}

/** A client that gives up at once when its server is gone (no reconnect, no offline queue). */
export async function crashClient(port: number): Promise<Redis> {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false, lazyConnect: true });
  c.on('error', () => undefined); // the crash drops the connection
  await c.connect();
  return c;
}

export interface RoundOptions {
  /** The port of the server the producers write to. */
  port: number;
  queueName: string;
  confirm?: ConfirmOptions;
  lanes: number;
  /** Acknowledgements before the crash starts. */
  cutAfter: number;
  /**
   * Each add followed by WAITAOF 1 0 on its connection, outside glidemq (which refuses confirm.fsync
   * where WAITAOF acknowledges before the fsync): shows what such an acknowledgement is worth.
   */
  rawWaitaof?: boolean;
  /** The crash (SIGKILL, a power cut): resolves once the server is gone. */
  crash: () => Promise<void>;
}

export interface RoundResult {
  attempted: number;
  /** The ids of the jobs whose add was acknowledged. */
  acknowledged: string[];
}

/**
 * Adds until the crash: `lanes` producers, each awaiting its add before the next. Resolves once
 * the server is gone and every add in flight has settled (acknowledged or rejected).
 */
export async function addUntilCrash(o: RoundOptions): Promise<RoundResult> {
  const client = await crashClient(o.port);
  const q = new Queue(o.queueName, { connection: client, confirm: o.confirm });
  q.on('error', () => undefined);
  await q.waitUntilReady();
  const acknowledged: string[] = [];
  let attempted = 0;
  let crashed: Promise<void> | undefined;
  let gone = false;
  const lane = async (n: number): Promise<void> => {
    for (let i = 0; !gone; i++) {
      attempted++;
      try {
        const job = await q.add('chaos', { lane: n, i });
        if (o.rawWaitaof) await client.call('WAITAOF', 1, 0, 5000);
        acknowledged.push(job.id!);
      } catch {
        if (gone || crashed) return; // the crash rejected it: not acknowledged
        throw new Error('an add failed before the crash');
      }
      if (!crashed && acknowledged.length >= o.cutAfter) {
        crashed = o.crash().then(() => {
          gone = true;
          client.disconnect(); // rejects whatever is still waiting for a reply
        });
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: o.lanes }, (_, n) => lane(n)));
    await crashed;
  } finally {
    client.disconnect();
    await q.close().catch(() => undefined);
  }
  return { attempted, acknowledged };
}

/** The acknowledged ids whose job is not on the server at `port` (after the restart or the promotion). */
export async function lostJobs(port: number, queueName: string, ids: string[]): Promise<string[]> {
  const c = await crashClient(port);
  try {
    const keys = new QueueKeys(queueName, DEFAULT_PREFIX);
    const present = await Promise.all(ids.map((id) => c.exists(keys.job(id))));
    return ids.filter((_, i) => present[i] === 0);
  } finally {
    c.disconnect();
  }
}
