/**
 * Running the parts of a flow stored across hash slots, and replaying a journal a producer left
 * (lua/flow-parts.lua, lua/flow-journal.lua). On a Valkey Cluster a flow whose queues span several
 * slots is stored in parts (flows/flow-journal.ts plans them): the first part stores its nodes and
 * the journal of the others in its own queue; the producer runs the others (parents' parts before
 * their children's) and deletes the journal. When the producer dies in the middle, maintenance
 * (a worker's upkeep of that queue, `glidemq heal`) finds the journal once it is older than a grace
 * period on the server's clock and runs every part it lists again: a part already stored answers
 * as stored, so the flow is rolled forward, never left half, and never stored twice.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import { confirmedCall, type Confirm } from './confirm.js';

/** How old (server ms) a journal must be before maintenance replays it: a live producer finishes its parts well before. */
export const FLOW_JOURNAL_GRACE_MS = 5000;

/** Journals replayed per call at most; the rest on the next. */
const REPLAY_BATCH = 50;

/** One glidemq_addFlowPart call: its KEYS and its ARGV. */
export interface FlowPart {
  keys: string[];
  args: (string | number)[];
}

/** The journal the first part stores: every remaining part, in the order they run. */
export interface FlowJournal {
  parts: FlowPart[];
}

/**
 * Runs `parts` one after another (each waits for the one before: a parent exists before its
 * children), each confirmed on the node of its slot when `confirm` asks (producing/confirm.ts), so
 * the journal is deleted only once every part is confirmed. Returns whether any of them stored new
 * jobs (false: every part was stored before).
 */
export async function runFlowParts(client: Client, parts: FlowPart[], confirm?: Confirm): Promise<boolean> {
  let created = false;
  for (const p of parts) {
    const what = () => ({ what: `flow part in ${p.keys[0]}` });
    const r = (await confirmedCall(client, 'glidemq_addFlowPart', p.keys, p.args, confirm, what)) as number[];
    if (Number(r[1]) === 1) created = true;
  }
  return created;
}

/** Forgets the journal `flowId` of the queue of `metaKey` (every part is stored). */
export async function flowJournalDone(client: Client, metaKey: string, flowId: string): Promise<void> {
  await callFunction(client, 'glidemq_flowJournalDone', metaKey, [flowId]);
}

/**
 * Rolls forward the flows whose journal in the queue of `metaKey` is at least `minAgeMs` old
 * (server clock): runs each one's parts again, then deletes the journal. Returns how many flows
 * were rolled forward. A journal whose part is refused stays (it is reported: the error of the
 * first one is thrown once the others were tried).
 */
export async function replayFlowJournals(client: Client, metaKey: string, minAgeMs = FLOW_JOURNAL_GRACE_MS): Promise<number> {
  const r = (await callFunction(client, 'glidemq_flowJournalDue', metaKey, [minAgeMs, REPLAY_BATCH])) as string[];
  let replayed = 0;
  let failure: unknown;
  for (let i = 0; i + 1 < r.length; i += 2) {
    const flowId = String(r[i]);
    try {
      const journal = JSON.parse(String(r[i + 1])) as FlowJournal;
      await runFlowParts(client, Array.isArray(journal.parts) ? journal.parts : []);
      await flowJournalDone(client, metaKey, flowId);
      replayed++;
    } catch (err) {
      if (err instanceof Error) err.message = `flow ${flowId}: rolling its journal forward failed (it is kept): ${err.message}`;
      failure ??= err;
    }
  }
  if (failure !== undefined) throw failure;
  return replayed;
}

/** How many journals of the queue of `metaKey` are at least `minAgeMs` old (check mode of heal). */
export async function dueFlowJournals(client: Client, metaKey: string, minAgeMs = FLOW_JOURNAL_GRACE_MS): Promise<number> {
  const r = (await callFunction(client, 'glidemq_flowJournalDue', metaKey, [minAgeMs, 10000])) as unknown[];
  return r.length / 2;
}
