/**
 * The queue's events stream as both of its readers use it, QueueEvents and EventLog: registering
 * a reader's presence (glidemq_listenEvents, lua/events.lua) and ordering stream ids. A file of
 * its own so that each reader (and finish-waiters.ts, which orders ids too) takes these from
 * one place below them instead of from QueueEvents.
 */
import type { Client } from '../connecting/connection.js';
import type { QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';

/**
 * glidemq_listenEvents (lua/events.lua) on `client`: registers (renews) a reader's presence for
 * `ttl` ms; `last` is the id of the newest event ('0-0': none), `lapsed` whether no reader was
 * present right before. `ifExists`: only on a queue that exists, since the presence is a field of
 * its meta hash and listening to a queue nothing used must not make it (an obliterate in the
 * instant between the two calls would leave the meta hash behind); otherwise only the newest id.
 */
export async function listenEvents(client: Client, keys: QueueKeys, ttl: number, ifExists = false): Promise<{ last: string; lapsed: boolean }> {
  if (ifExists && (await client.exists(keys.meta)) !== 1) {
    const newest = (await client.xrevrange(keys.events, '+', '-', 'COUNT', 1)) as [string, string[]][];
    return { last: newest[0]?.[0] ?? '0-0', lapsed: false };
  }
  const r = (await callFunction(client, 'glidemq_listenEvents', keys.meta, [ttl])) as [string, number];
  return { last: String(r[0]), lapsed: Number(r[1]) === 1 };
}

/** Orders two stream ids (`<ms>-<seq>`, the seq optional). */
export function compareIds(a: string, b: string): number {
  if (a === '$' || b === '$') return a === b ? 0 : a === '$' ? 1 : -1;
  const [am, as = '0'] = a.split('-');
  const [bm, bs = '0'] = b.split('-');
  const ms = BigInt(am) - BigInt(bm);
  if (ms !== 0n) return ms < 0n ? -1 : 1;
  const seq = BigInt(as) - BigInt(bs);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}
