/**
 * Relaying a queue's dead-outbox (lua/dead-letters.lua): on a cluster, the dead letters a failure
 * for good wrote in the source queue's own slot, in the same call, for its dead-letter queue in
 * another slot. This side stores them in the dead-letter queue (glidemq_storeDeadLetters,
 * idempotent: a dead letter whose id exists is not stored again) and then forgets them
 * (glidemq_deadOutboxDone, only while the record is still the one relayed). A worker relays right
 * after a finish reply that carries the '{relay}' mark, and after a stalled check that failed jobs
 * for good; maintenance relays what a crash left once a record is older than the grace period on
 * the server's clock (a race with a live worker's relay would store nothing twice anyway).
 * A job whose failure was acknowledged so reaches its dead-letter queue once, even across a crash.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import { confirmedCall, type Confirm } from './confirm.js';
import { OUTBOX_GRACE_MS, relayOutbox } from './flow-outbox.js';

/** How old (server ms) a record must be before maintenance relays it: a live worker relays at once. */
export const DEAD_OUTBOX_GRACE_MS = OUTBOX_GRACE_MS;

/** Records read, stored and forgotten per round at most; a relay goes on until the outbox is drained. */
const RELAY_BATCH = 500;

/** The meta key of queue `name` beside the queue of meta key `metaKey` (the same prefix), or undefined. */
function siblingMeta(metaKey: string, name: string): string | undefined {
  const m = /^(.*):\{[^{}]*\}:meta$/.exec(metaKey);
  return m ? `${m[1]}:{${name}}:meta` : undefined;
}

/** The dead-letter queue a record is for, or undefined for a record that cannot be stored (it is forgotten). */
function targetOf(record: string): string | undefined {
  try {
    const r = JSON.parse(record) as { t?: unknown; q?: unknown; f?: unknown };
    const fieldsOk = Array.isArray(r.f) && r.f.length > 0 && r.f.length % 2 === 0 && r.f.every((v) => typeof v === 'string');
    return typeof r.q === 'string' && r.q !== '' && typeof r.t === 'number' && fieldsOk ? r.q : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Relays the dead-outbox records of the queue of `metaKey` written at least `minAgeMs` ms ago
 * (server clock), until none is left: per round one read, one glidemq_storeDeadLetters per
 * dead-letter queue, and one glidemq_deadOutboxDone. A record is forgotten only after it was stored
 * (a crash between the two leaves it, and storing it again stores nothing). Returns how many
 * records were relayed.
 */
export async function relayDeadLetters(client: Client, metaKey: string, minAgeMs = 0, confirm?: Confirm): Promise<number> {
  let relayed = 0;
  for (;;) {
    const r = (await callFunction(client, 'glidemq_deadOutboxList', metaKey, [minAgeMs, RELAY_BATCH])) as string[];
    if (r.length === 0) return relayed;
    const byQueue = new Map<string, string[]>();
    const done: string[] = [];
    for (let i = 0; i + 1 < r.length; i += 2) {
      const id = String(r[i]);
      const record = String(r[i + 1]);
      const name = targetOf(record);
      const dlqMeta = name === undefined ? undefined : siblingMeta(metaKey, name);
      if (dlqMeta) byQueue.set(dlqMeta, [...(byQueue.get(dlqMeta) ?? []), id, record]);
      done.push(id, record);
    }
    await Promise.all([...byQueue].map(([dlqMeta, args]) =>
      confirmedCall(client, 'glidemq_storeDeadLetters', dlqMeta, [args.length / 2, ...args], confirm, () => ({ what: `dead-letter relay to ${dlqMeta}` }))));
    await callFunction(client, 'glidemq_deadOutboxDone', metaKey, [done.length / 2, ...done]);
    relayed += done.length / 2;
    if (done.length / 2 < RELAY_BATCH) return relayed;
  }
}

/**
 * Relays both outboxes of a queue (flow settlements, producing/flow-outbox.ts, and dead letters):
 * what a finish reply's '{relay}' mark, or maintenance, asks for; a confirming worker's relay passes
 * its `confirm`, so what it writes on other queues is confirmed there first. Returns the records relayed.
 */
export async function relayOutboxes(client: Client, metaKey: string, minAgeMs = 0, confirm?: Confirm): Promise<number> {
  const flows = await relayOutbox(client, metaKey, minAgeMs, confirm);
  return flows + (await relayDeadLetters(client, metaKey, minAgeMs, confirm));
}
