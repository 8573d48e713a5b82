/**
 * Flows added together are stored together: the FlowProducer.add calls one producer makes in the
 * same turn of the event loop (a web server's concurrent requests, `Promise.all` of adds) go to
 * the server as one glidemq_addFlow call instead of one each.
 *
 * Why: a call's own work on the server (reading the producer's once-only record and writing the
 * reply, the server's time, the type checks of each queue's keys, the call's dispatch and its
 * network read and write) is ~220k instructions, a sixth of what storing a parent with ten
 * children costs; eight flows in one call pay it once (test/bench/flow-instructions.ts: 1,290k
 * instructions per such flow added alone, 1,098k eight at a time).
 *
 * What a caller sees does not change:
 * - each flow is still stored whole or not at all (the combined call is atomic, so stronger);
 * - a refusal of the combined call (a bad argument, a job that exists, a wrong key type: the
 *   function wrote nothing, lua/flow.lua) is never another flow's failure: each flow is then sent
 *   alone, and gets exactly the answer it would have had by itself;
 * - a lost reply is re-sent as the same numbered call (producing/producer.ts), so nothing is
 *   stored twice;
 * - a flow waits at most one turn of the event loop for others (setImmediate).
 * Only flows that one call may hold are combined: on a cluster, those whose queues share one hash
 * slot (a flow spanning slots is stored in parts, flow-journal.ts, alone as before).
 */
import { isCluster, keySlot, type Client } from '../connecting/connection.js';
import { GlideMQError } from '../shared/errors.js';
import { nodeKeys, type FlowNode } from './flow-nodes.js';

/** Flows and jobs one combined call holds at most (the Lua takes up to 10,000 nodes). */
export const COALESCE_MAX_FLOWS = 64;
export const COALESCE_MAX_NODES = 1000;

interface Pending<T> {
  nodes: FlowNode[];
  resolve: (tree: T) => void;
  reject: (err: unknown) => void;
}

/** Stores node lists in one call, each answered by its result in order (FlowProducer.store). */
export type StoreLists<T> = (lists: FlowNode[][]) => Promise<T[]>;

export class FlowCoalescer<T> {
  private pending: Pending<T>[] = [];
  /** The calls sent and not settled yet (drain waits for them). */
  private readonly sending = new Set<Promise<void>>();

  constructor(
    private readonly client: () => Client,
    private readonly store: StoreLists<T>,
  ) {}

  /** Stores `nodes` (one flow) with the others added in this turn; resolves to its result. */
  add(nodes: FlowNode[]): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      // the turn's first add schedules the flush; the others wait with it
      if (this.pending.push({ nodes, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  /**
   * Sends what waits now and resolves once every add made so far has its answer: the producer's
   * close() runs it first, so an add made just before close() is stored, not cut off.
   */
  async drain(): Promise<void> {
    this.flush();
    await Promise.all(this.sending);
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    for (const chunk of this.chunks(batch)) {
      const sent = this.send(chunk).finally(() => this.sending.delete(sent));
      this.sending.add(sent);
    }
  }

  /** `batch` cut into calls: flows of one slot together (any flows on a standalone server), within the limits. */
  private chunks(batch: Pending<T>[]): Pending<T>[][] {
    const cluster = isCluster(this.client());
    const open = new Map<number, { flows: Pending<T>[]; nodes: number }>();
    const out: Pending<T>[][] = [];
    for (const p of batch) {
      const slot = cluster ? oneSlot(p.nodes) : 0;
      if (slot === undefined) {
        out.push([p]);
        continue;
      }
      let group = open.get(slot);
      if (group && (group.flows.length >= COALESCE_MAX_FLOWS || group.nodes + p.nodes.length > COALESCE_MAX_NODES)) {
        out.push(group.flows);
        group = undefined;
      }
      if (!group) open.set(slot, (group = { flows: [], nodes: 0 }));
      group.flows.push(p);
      group.nodes += p.nodes.length;
    }
    for (const group of open.values()) out.push(group.flows);
    return out;
  }

  private async send(chunk: Pending<T>[]): Promise<void> {
    if (chunk.length > 1) {
      try {
        const results = await this.store(chunk.map((p) => p.nodes));
        chunk.forEach((p, i) => p.resolve(results[i]));
        return;
      } catch (err) {
        // a refusal wrote nothing: each flow alone gets its own answer. Any other failure (the
        // connection) is every flow's, as it would have been for each call.
        if (!(err instanceof GlideMQError && err.usage)) {
          for (const p of chunk) p.reject(err);
          return;
        }
      }
    }
    await Promise.all(
      chunk.map(async (p) => {
        try {
          p.resolve((await this.store([p.nodes]))[0]);
        } catch (err) {
          p.reject(err);
        }
      }),
    );
  }
}

/** The hash slot every queue of `nodes` is in, or undefined when they span several. */
function oneSlot(nodes: FlowNode[]): number | undefined {
  let slot: number | undefined;
  for (const n of nodes) {
    const s = keySlot(nodeKeys(n).meta);
    if (slot === undefined) slot = s;
    else if (s !== slot) return undefined;
  }
  return slot;
}
