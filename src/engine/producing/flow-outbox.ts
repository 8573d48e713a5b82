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

/** Records read, settled and forgotten per call at most; a relay goes on until the outbox is drained. */
const RELAY_BATCH = 500;

/** The parent's job key as its queue's meta key and its job id, or undefined for a text that is not one. */
export function splitJobKey(key: string): { metaKey: string; id: string } | undefined {
  const m = /^(.+):job:([^:\s]+)$/.exec(key);
  return m ? { metaKey: `${m[1]}:meta`, id: m[2] } : undefined;
}

/** One outbox record as read: its field and value, and the settlement it asks for (none when unreadable). */
interface OutboxRecord {
  field: string;
  value: string;
  settle?: { metaKey: string; args: string[] };
}

function readRecord(field: string, value: string): OutboxRecord {
  const [parentKey, childKey] = field.split(' ');
  const parent = splitJobKey(parentKey ?? '');
  let rec: { k?: unknown; v?: unknown } = {};
  try {
    rec = JSON.parse(value) as typeof rec;
  } catch {
    /* an unreadable record is forgotten */
  }
  if (!parent || !childKey || typeof rec.k !== 'string') return { field, value };
  return { field, value, settle: { metaKey: parent.metaKey, args: [parent.id, childKey, rec.k, typeof rec.v === 'string' ? rec.v : ''] } };
}

/**
 * Relays the outbox records of the queue of `metaKey` written at least `minAgeMs` ms ago (server
 * clock), until none is left: per round, one read, one glidemq_settle per parents' queue with all
 * of that queue's settlements, and one glidemq_outboxDone. A record is forgotten only after its
 * settlement was made (a crash between the two leaves it, and its settling again changes nothing).
 * A parent that fails in turn may write a record in its own queue's outbox: that one is relayed
 * too. Returns how many records were relayed.
 */
export async function relayOutbox(client: Client, metaKey: string, minAgeMs = 0): Promise<number> {
  let relayed = 0;
  for (;;) {
    const r = (await callFunction(client, 'glidemq_outboxList', metaKey, [minAgeMs, RELAY_BATCH])) as string[];
    if (r.length === 0) return relayed;
    const records: OutboxRecord[] = [];
    for (let i = 0; i + 1 < r.length; i += 2) records.push(readRecord(String(r[i]), String(r[i + 1])));
    const byQueue = new Map<string, string[]>();
    for (const rec of records) {
      if (!rec.settle) continue;
      const args = byQueue.get(rec.settle.metaKey) ?? [];
      args.push(...rec.settle.args);
      byQueue.set(rec.settle.metaKey, args);
    }
    const cascades: string[] = [];
    await Promise.all([...byQueue].map(async ([parentMeta, args]) => {
      const reply = (await callFunction(client, 'glidemq_settle', parentMeta, [args.length / 4, ...args])) as number[];
      if (Number(reply[1]) === 1) cascades.push(parentMeta);
    }));
    for (const parentMeta of cascades) relayed += await relayOutbox(client, parentMeta, 0);
    await callFunction(client, 'glidemq_outboxDone', metaKey, [records.length, ...records.flatMap((rec) => [rec.field, rec.value])]);
    relayed += records.length;
    if (records.length < RELAY_BATCH) return relayed;
  }
}
