/**
 * Relaying a queue's flow outbox (lua/flow-keys.lua): what its children owe to parents in another
 * queue, and what its removed parents owe to children in another queue (lua/remove.lua). A child's finish writes the record in the child's own slot, in the same call; this side
 * settles it on the parent's queue (glidemq_settle, idempotent: the parent's deps decide) and then
 * forgets it (glidemq_outboxDone, only while the record is still the one relayed). A worker relays
 * right after a finish reply that reports a record; maintenance relays what a crash left, once a
 * record is older than a grace period on the server's clock (so it does not race a live worker's
 * relay; a race would change nothing anyway).
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import { confirmedCall, type Confirm } from './confirm.js';

/** How old (server ms) a record must be before maintenance relays it: a live worker relays at once. */
export const OUTBOX_GRACE_MS = 5000;

/** Records read, settled and forgotten per call at most; a relay goes on until the outbox is drained. */
const RELAY_BATCH = 500;

/** The parent's job key as its queue's meta key and its job id, or undefined for a text that is not one. */
export function splitJobKey(key: string): { metaKey: string; id: string } | undefined {
  const m = /^(.+):job:([^:\s]+)$/.exec(key);
  return m ? { metaKey: `${m[1]}:meta`, id: m[2] } : undefined;
}

/** The kinds of a record a removed parent owes a child in another slot (lua/remove.lua): the child goes with it, or is unlinked. */
const PARENT_REMOVED: Record<string, string> = { removeChild: 'remove', unlinkChild: 'unlink' };

/** One outbox record as read: its field and value, and the call it asks for on another queue (none when unreadable). */
interface OutboxRecord {
  field: string;
  value: string;
  call?: { fn: 'glidemq_settle' | 'glidemq_parentRemoved'; metaKey: string; args: string[] };
}

/**
 * A record's field is '<target> <other>': a settlement is owed to the parent `target` by the child
 * `other`; a removal ('removeChild', 'unlinkChild') to the child `target` by its removed parent `other`.
 */
function readRecord(field: string, value: string): OutboxRecord {
  const [targetKey, otherKey] = field.split(' ');
  const target = splitJobKey(targetKey ?? '');
  let rec: { k?: unknown; v?: unknown } = {};
  try {
    rec = JSON.parse(value) as typeof rec;
  } catch {
    /* an unreadable record is forgotten */
  }
  if (!target || !otherKey || typeof rec.k !== 'string') return { field, value };
  const action = PARENT_REMOVED[rec.k];
  if (action) return { field, value, call: { fn: 'glidemq_parentRemoved', metaKey: target.metaKey, args: [target.id, otherKey, action] } };
  return { field, value, call: { fn: 'glidemq_settle', metaKey: target.metaKey, args: [target.id, otherKey, rec.k, typeof rec.v === 'string' ? rec.v : ''] } };
}

/**
 * Relays the outbox records of the queue of `metaKey` written at least `minAgeMs` ms ago (server
 * clock), until none is left: per round, one read, one glidemq_settle per parents' queue with all
 * of that queue's settlements (and one glidemq_parentRemoved per children's queue with what removed
 * parents owe there), and one glidemq_outboxDone. A record is forgotten only after its call was
 * made (a crash between the two leaves it, and making it again changes nothing). A parent that
 * fails in turn, or a removed child's own children in other slots, may write records in that
 * queue's outbox: those are relayed too. With `confirm` (a confirming worker's relay), each call on
 * another queue is confirmed on the primary of its slot before the records are forgotten, so a crash
 * of that node cannot lose a settlement whose record is gone. Returns how many records were relayed.
 */
export async function relayOutbox(client: Client, metaKey: string, minAgeMs = 0, confirm?: Confirm): Promise<number> {
  let relayed = 0;
  for (;;) {
    const r = (await callFunction(client, 'glidemq_outboxList', metaKey, [minAgeMs, RELAY_BATCH])) as string[];
    if (r.length === 0) return relayed;
    const records: OutboxRecord[] = [];
    for (let i = 0; i + 1 < r.length; i += 2) records.push(readRecord(String(r[i]), String(r[i + 1])));
    // one call per function and target queue, with all of that queue's records
    const byCall = new Map<string, { fn: string; metaKey: string; args: string[] }>();
    for (const rec of records) {
      if (!rec.call) continue;
      const id = `${rec.call.fn} ${rec.call.metaKey}`;
      const group = byCall.get(id) ?? { fn: rec.call.fn, metaKey: rec.call.metaKey, args: [] };
      group.args.push(...rec.call.args);
      byCall.set(id, group);
    }
    const cascades = new Set<string>();
    await Promise.all([...byCall.values()].map(async ({ fn, metaKey: target, args }) => {
      const width = fn === 'glidemq_settle' ? 4 : 3;
      const what = () => ({ what: `flow relay (${fn}) to ${target}` });
      const reply = (await confirmedCall(client, fn, target, [args.length / width, ...args], confirm, what)) as number[];
      if (Number(reply[1]) === 1) cascades.add(target);
    }));
    for (const target of cascades) relayed += await relayOutbox(client, target, 0, confirm);
    await callFunction(client, 'glidemq_outboxDone', metaKey, [records.length, ...records.flatMap((rec) => [rec.field, rec.value])]);
    relayed += records.length;
    if (records.length < RELAY_BATCH) return relayed;
  }
}
