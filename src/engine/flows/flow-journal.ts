/**
 * A flow across hash slots (a Valkey Cluster): one glidemq_addFlow call cannot write queues of
 * several slots, so a flow whose queues span more than one slot is stored in parts, one per slot
 * and level (lua/flow-parts.lua). A node's level is the number of slot changes on its longest
 * path from a root, so a parent's part always runs before its children's: a child that runs and
 * settles always finds its parent. The first part, in the slot of the flow's first node (or of
 * the existing parent a child names), stores its nodes, registers the children of existing
 * parents, and keeps the journal of every other part; the others follow in order; a last call
 * deletes the journal. A producer that dies in the middle leaves the journal, which maintenance
 * rolls forward (producing/flow-journal-replay.ts). A flow in one slot stays one call.
 */
import { isCluster, keySlot, type Client } from '../connecting/connection.js';
import { invalid, NotSupportedError } from '../shared/errors.js';
import { QueueKeys } from '../shared/keys.js';
import { flowJournalDone, runFlowParts, type FlowPart } from '../producing/flow-journal-replay.js';
import type { Producer } from '../producing/producer.js';
import { confirmedCall, type Confirm } from '../producing/confirm.js';
import { nodeKey, nodeKeys, type EncodedFlow, type FlowNode } from './flow-nodes.js';

/** What storing a flow in parts needs of its caller (a FlowProducer, or a Queue adding a child). */
interface PartsTarget {
  client: Client;
  producer: Producer;
  maxPayload: number;
  /** Each part confirmed on the node of its slot (producing/confirm.ts), or none. */
  confirm?: Confirm;
}

/** A part being planned: its slot and level, its nodes (indexes into the flow) and its links. */
interface PlannedPart {
  slot: number;
  level: number;
  nodes: number[];
  links: [string, string][];
}

const metaOfJobKey = (key: string) => `${/^(.+):job:[^:\s]+$/.exec(key)![1]}:meta`;

/** The keys of the queue of meta key `meta` (`<prefix>:{<queue>}:meta`). */
function queueOfMeta(meta: string): QueueKeys {
  const m = /^(.+):\{([^{}]+)\}:meta$/.exec(meta)!;
  return new QueueKeys(m[2], m[1]);
}

/** Whether `nodes` must be stored in parts: a cluster client, and queues (the flow's and its existing parents') in more than one slot. */
export function needsParts(client: Client, enc: EncodedFlow): boolean {
  return isCluster(client) && new Set(enc.keys.map(keySlot)).size > 1;
}

/** Each node's level: 0 for a root; a parent's level, plus 1 when the parent is in another slot. */
function levels(nodes: FlowNode[], slots: number[]): number[] {
  const index = new Map(nodes.map((n, i) => [nodeKey(n), i]));
  const memo: (number | undefined)[] = [];
  const levelOf = (i: number): number => {
    const known = memo[i];
    if (known !== undefined) return known;
    let level = 0;
    for (const p of nodes[i].parents) {
      const pi = index.get(p);
      const pSlot = pi === undefined ? keySlot(metaOfJobKey(p)) : slots[pi];
      const step = pSlot === slots[i] ? 0 : 1;
      level = Math.max(level, (pi === undefined ? 0 : levelOf(pi)) + step);
    }
    memo[i] = level;
    return level;
  };
  return nodes.map((_, i) => levelOf(i));
}

/** The parts of a flow, in the order they run; the first keeps the journal. */
export function planParts(nodes: FlowNode[]): PlannedPart[] {
  const slots = nodes.map((n) => keySlot(nodeKeys(n).meta));
  const keys = new Set(nodes.map((n) => nodeKey(n)));
  const links: [string, string][] = [];
  for (const n of nodes) for (const p of n.parents) if (!keys.has(p)) links.push([p, nodeKey(n)]);
  const linkSlots = new Set(links.map(([p]) => keySlot(metaOfJobKey(p))));
  if (linkSlots.size > 1) {
    throw new NotSupportedError('ERR_NOT_SUPPORTED', 'flow: on a cluster, the existing parents a flow names must all be in one hash slot; add the children of each parent separately', true);
  }
  const lv = levels(nodes, slots);
  // the first part: in the slot of the existing parents, else of the first node that has no parent
  // in another slot (the top of a tree; a DAG's list may start anywhere)
  const firstSlot = links.length ? [...linkSlots][0] : slots[lv.indexOf(0)];
  const parts = new Map<string, PlannedPart>();
  const partOf = (slot: number, level: number) => {
    const id = `${level}:${slot}`;
    let p = parts.get(id);
    if (!p) parts.set(id, (p = { slot, level, nodes: [], links: [] }));
    return p;
  };
  partOf(firstSlot, 0).links.push(...links);
  nodes.forEach((_, i) => partOf(slots[i], lv[i]).nodes.push(i));
  const rank = (p: PlannedPart) => [p.level, p.slot === firstSlot ? -1 : p.slot];
  return [...parts.values()].sort((a, b) => {
    const [la, sa] = rank(a);
    const [lb, sb] = rank(b);
    return la - lb || sa - sb;
  });
}

/** The KEYS and ARGV (without the producer's head) of one planned part. */
function partCall(p: PlannedPart, nodes: FlowNode[], enc: EncodedFlow, journalMeta: string | undefined): { keys: string[]; groups: (string | number)[][] } {
  const keys: string[] = journalMeta ? [journalMeta] : [];
  const indexOf = (meta: string) => {
    let i = keys.indexOf(meta);
    if (i < 0) i = keys.push(meta) - 1;
    return i + 1;
  };
  const groups = p.nodes.map((i) => {
    const g = [...enc.groups[i]];
    g[0] = indexOf(nodeKeys(nodes[i]).meta);
    return g;
  });
  for (const [parent] of p.links) indexOf(metaOfJobKey(parent));
  return { keys, groups };
}

/** A flow's parts as calls: the first (its producer head left '', 0, 0) and the rest, which its journal lists. */
export interface PartsPlan {
  flowId: string;
  /** The meta key of the queue that keeps the journal (the first part's KEYS[1]). */
  journalMeta: string;
  first: FlowPart;
  /** Whether the first part stores jobs (it may only register children of existing parents). */
  firstHasNodes: boolean;
  rest: FlowPart[];
}

/** The parts of `nodes` (encoded as `enc`) as glidemq_addFlowPart calls. */
export function partsOf(nodes: FlowNode[], enc: EncodedFlow, maxPayload: number): PartsPlan {
  const [first, ...others] = planParts(nodes);
  const flowId = nodeKey(nodes[0]);
  const rest: FlowPart[] = others.map((p) => {
    const c = partCall(p, nodes, enc, undefined);
    return { keys: c.keys, args: [maxPayload, '', 0, 0, flowId, '', '', c.groups.length, ...c.groups.flat()] };
  });
  const journalMeta = first.nodes.length ? nodeKeys(nodes[first.nodes[0]]).meta : metaOfJobKey(first.links[0][0]);
  const head = partCall(first, nodes, enc, journalMeta);
  const journal = JSON.stringify({ parts: rest });
  const args = [maxPayload, '', 0, 0, flowId, journal, first.links.flat().join(' '), head.groups.length, ...head.groups.flat()];
  return { flowId, journalMeta, first: { keys: head.keys, args }, firstHasNodes: first.nodes.length > 0, rest };
}

/**
 * Refuses, before the first part is sent, a flow some of whose jobs exist while others do not (ids
 * given again for other jobs): each part's call checks only its own slot, so a later part would be
 * refused after the first was stored. A flow whose journal exists is being stored (a producer's
 * resend after it died): its parts go on. Reads only; a job taken between this check and its part
 * is still refused by that part (its journal then stays, and maintenance reports it).
 */
async function refuseTakenIds(client: Client, nodes: FlowNode[], plan: PartsPlan): Promise<void> {
  const keys = nodes.map((n) => nodeKey(n));
  const exists = await Promise.all(keys.map((k) => client.exists(k)));
  const taken = exists.filter((e) => e === 1).length;
  if (taken === 0 || taken === keys.length) return;
  if ((await client.hexists(queueOfMeta(plan.journalMeta).flows, plan.flowId)) === 1) return;
  throw invalid(`flow: job ${keys[exists.indexOf(1)]} exists already, and other jobs of the flow do not: a flow is stored whole with new jobs (give its jobs other ids)`);
}

/**
 * Stores `nodes` (encoded as `enc`) in parts: the first with the journal (numbered for once-only
 * adds), then the others in order, then the journal is deleted. With `confirm`, each part is
 * confirmed on the primary of its own slot before the next runs. Returns the first part's server
 * ts, and whether this call stored the flow's jobs (false: a resend of a flow stored before).
 */
export async function addInParts(t: PartsTarget, nodes: FlowNode[], enc: EncodedFlow): Promise<{ ts: number; created: boolean }> {
  const plan = partsOf(nodes, enc, t.maxPayload);
  await refuseTakenIds(t.client, nodes, plan);
  const call = t.producer.next();
  let reply: number[];
  try {
    const args = [...plan.first.args];
    args.splice(1, 3, ...call.args);
    const what = () => ({ what: `flow part with the journal of flow ${plan.flowId}` });
    reply = (await confirmedCall(t.client, 'glidemq_addFlowPart', plan.first.keys, args, t.confirm, what)) as number[];
  } finally {
    call.done();
  }
  const restCreated = await runFlowParts(t.client, plan.rest, t.confirm);
  await flowJournalDone(t.client, plan.journalMeta, plan.flowId);
  // created: some part stored new jobs (a first part that only registers links stores none)
  const firstCreated = Number(reply[1]) === 1 && plan.firstHasNodes;
  return { ts: Number(reply[0]), created: firstCreated || restCreated };
}
