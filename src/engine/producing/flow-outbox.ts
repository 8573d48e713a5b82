/**
 * Relaying a queue's flow outbox (lua/flow-keys.lua): what its children owe to parents in another
 * queue. A child's finish writes the record in the child's own slot, in the same call; this side
 * settles it on the parent's queue (glidemq_settle, idempotent: the parent's deps decide) and then
 * forgets it (glidemq_outboxDone, only while the record is still the one relayed). A worker relays
 * right after a finish reply that reports a record; maintenance relays what a crash left, once a
 * record is older than a grace period on the server's clock (so it does not race a live worker's
 * relay; a race would change nothing anyway).
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';

/** How old (server ms) a record must be before maintenance relays it: a live worker relays at once. */
export const OUTBOX_GRACE_MS = 5000;

/** Records relayed per call at most; the rest on the next. */
const RELAY_BATCH = 100;

/** The parent's job key as its queue's meta key and its job id, or undefined for a text that is not one. */
export function splitJobKey(key: string): { metaKey: string; id: string } | undefined {
  const m = /^(.+):job:([^:\s]+)$/.exec(key);
  return m ? { metaKey: `${m[1]}:meta`, id: m[2] } : undefined;
}

/**
 * Relays the outbox records of the queue of `metaKey` written at least `minAgeMs` ms ago (server
 * clock). A parent that fails in turn may write a record in its own queue's outbox: that one is
 * relayed too. Returns how many records were relayed.
 */
export async function relayOutbox(client: Client, metaKey: string, minAgeMs = 0): Promise<number> {
  const r = (await callFunction(client, 'glidemq_outboxList', metaKey, [minAgeMs, RELAY_BATCH])) as string[];
  let relayed = 0;
  for (let i = 0; i + 1 < r.length; i += 2) {
    const field = String(r[i]);
    const value = String(r[i + 1]);
    const [parentKey, childKey] = field.split(' ');
    const parent = splitJobKey(parentKey ?? '');
    let rec: { k?: unknown; v?: unknown } = {};
    try {
      rec = JSON.parse(value) as typeof rec;
    } catch {
      /* an unreadable record is forgotten below */
    }
    if (parent && childKey && typeof rec.k === 'string') {
      const reply = (await callFunction(client, 'glidemq_settle', parent.metaKey, [parent.id, childKey, rec.k, typeof rec.v === 'string' ? rec.v : ''])) as number[];
      if (Number(reply[1]) === 1) relayed += await relayOutbox(client, parent.metaKey, 0);
    }
    await callFunction(client, 'glidemq_outboxDone', metaKey, [field, value]);
    relayed++;
  }
  return relayed;
}
