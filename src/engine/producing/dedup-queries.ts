/**
 * BullMQ's deduplication queries over glidemq's dedup hash (lua/dedup.lua): which job an id points
 * at while it still deduplicates, and removing an id so that the next add with it creates a job.
 */
import type { Client } from '../connecting/connection.js';
import type { QueueKeys } from '../shared/keys.js';

/** An entry `<mode>:<expiresAt>:<jobId>` (lua/dedup.lua dedupEntry), or undefined if unreadable. */
function parseEntry(v: string): { mode: string; expiresAt: number; jobId: string } | undefined {
  const m = /^([a-z]):(\d+):(.*)$/i.exec(v);
  return m ? { mode: m[1], expiresAt: Number(m[2]), jobId: m[3] } : undefined;
}

/**
 * The job that dedup id `id` points at while it still blocks adds, else null (as BullMQ's key that
 * expired or was deleted). The window is judged on the server's TIME, read in the same MULTI as the
 * entry; a simple-mode id lasts only while its job is unfinished, as BullMQ's, and a debounce
 * (replace) id only while its job can still take an add's data: as an add judges it
 * (lua/dedup.lua dedupEntryOver), whether or not the sweep has deleted it yet.
 */
export async function deduplicationJobId(client: Client, keys: QueueKeys, id: string): Promise<string | null> {
  const r = await client.multi().hget(keys.dedup, id).time().exec();
  const raw = r?.[0]?.[1] as string | null;
  const [s, us] = (r?.[1]?.[1] as [string, string]) ?? ['0', '0'];
  const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
  const e = raw ? parseEntry(raw) : undefined;
  if (!e || e.jobId === '' || (e.expiresAt !== 0 && now >= e.expiresAt)) return null;
  if (e.mode === 's' || e.mode === 'd') {
    const [state, fence] = await client.hmget(keys.job(e.jobId), 'state', 'fence');
    if (e.mode === 's' && (state === null || state === 'completed' || state === 'failed')) return null;
    // a debounce (replace) id stands while its job waits out its first delay (lua/dedup.lua debounceable)
    if (e.mode === 'd' && (state !== 'delayed' || fence !== null)) return null;
  }
  return e.jobId;
}

/** Deletes dedup id `id`, whatever job it points at: 1 if it was there, else 0 (BullMQ's count). */
export async function removeDeduplicationKey(client: Client, keys: QueueKeys, id: string): Promise<number> {
  return client.hdel(keys.dedup, id);
}
