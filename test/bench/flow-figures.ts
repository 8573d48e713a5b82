/**
 * The flow rows of `make bench` (issue 29): glidemq's FlowProducer against BullMQ's, each used as
 * its documentation shows, on the same flushed server in turn.
 *   flow.add  parents with 10 children added, flows/s (FLOWS_IN_FLIGHT adds awaited together);
 *   flow.cpu  server CPU per such flow, from its add to its parent's completion (INFO cpu);
 *   flow.e2e  one parent with 100 children: ms from the add call to the parent's completed event,
 *             workers already running on both queues (the median of E2E_RUNS flows).
 */
import type { Redis } from 'ioredis';
import { FlowProducer as BullFlowProducer, Worker as BullWorker } from 'bullmq';
import { FlowProducer, Worker } from '../../src/index.js';
import { median, serverCpuSeconds } from './measure.js';
import type { SystemName } from './systems.js';

export interface FlowSizes {
  /** Flows added for flow.add and flow.cpu, and the time bound of their adding. */
  flows: number;
  flowAddMaxMs: number;
  /** Flows of 100 children timed end to end, one after the other. */
  e2eRuns: number;
}

export const FLOWS_IN_FLIGHT = 8;
const PARENTS = 'bench-parents';
const CHILDREN = 'bench-children';
/** Both systems keep nothing once a job completes, as the backlog rows do. */
const GONE = { removeOnComplete: true };

interface Tree {
  name: string;
  queueName: string;
  data: unknown;
  opts?: { removeOnComplete?: boolean };
  children?: Tree[];
}

/** A parent in PARENTS with `n` children in CHILDREN. */
export function flowOf(n: number, tag: number): Tree {
  const children = Array.from({ length: n }, (_, i) => ({ name: 'child', queueName: CHILDREN, data: { i }, opts: GONE }));
  return { name: 'parent', queueName: PARENTS, data: { tag }, opts: GONE, children };
}

interface FlowSide {
  name: SystemName;
  producer(url: string): { add(tree: Tree): Promise<unknown>; close(): Promise<unknown> };
  /** Workers on both queues (children at concurrency 10, parents at 10); `onParent` sees each finished parent's data. */
  workers(url: string, onParent: (data: { tag: number }) => void): Promise<{ close(): Promise<unknown> }>;
}

const processor = async () => null;

function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

const glidemqFlows: FlowSide = {
  name: 'glidemq',
  producer: (url) => new FlowProducer({ connection: url }),
  async workers(url, onParent) {
    const children = new Worker(CHILDREN, processor, { connection: url, concurrency: 10 });
    const parents = new Worker(PARENTS, processor, { connection: url, concurrency: 10 });
    parents.on('completed', (job) => onParent(job.data as { tag: number }));
    for (const w of [children, parents]) w.on('error', (err) => console.error(`glidemq worker error: ${String(err)}`));
    await Promise.all([children.waitUntilReady(), parents.waitUntilReady()]);
    return { close: () => Promise.all([children.close(), parents.close()]) };
  },
};

const bullmqFlows: FlowSide = {
  name: 'BullMQ',
  producer: (url) => new BullFlowProducer({ connection: hostPort(url) }),
  async workers(url, onParent) {
    const children = new BullWorker(CHILDREN, processor, { connection: hostPort(url), concurrency: 10 });
    const parents = new BullWorker(PARENTS, processor, { connection: hostPort(url), concurrency: 10 });
    parents.on('completed', (job) => onParent(job.data as { tag: number }));
    for (const w of [children, parents]) w.on('error', (err) => console.error(`BullMQ worker error: ${String(err)}`));
    await Promise.all([children.waitUntilReady(), parents.waitUntilReady()]);
    return { close: () => Promise.all([children.close(), parents.close()]) };
  },
};

export const FLOW_SIDES: Record<SystemName, FlowSide> = { glidemq: glidemqFlows, BullMQ: bullmqFlows };

/** `p`, or a rejection naming `what` once `ms` passed (the timer does not outlive `p`). */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} had not completed after ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Counts completed parents; `done` resolves at the `count`th. */
function parentsDone(count: number): { seen: () => void; done: Promise<void> } {
  let left = count;
  let resolve!: () => void;
  const done = new Promise<void>((res) => (resolve = res));
  return { seen: () => void (--left === 0 && resolve()), done };
}

/**
 * flow.add and flow.cpu: adds parents with 10 children, FLOWS_IN_FLIGHT at a time, with no worker
 * running (flows/s); then processes them all and reports the server's CPU from the first add to
 * the last parent's completion, per flow.
 */
export async function flowAdds(side: FlowSide, url: string, admin: Redis, s: FlowSizes): Promise<{ rate: number; cpuUsPerFlow: number }> {
  const producer = side.producer(url);
  try {
    await producer.add(flowOf(10, -1)); // connect and load before the clock starts
    const cpu0 = await serverCpuSeconds(admin);
    const t0 = performance.now();
    let added = 0;
    while (added < s.flows && performance.now() - t0 < s.flowAddMaxMs) {
      const wave = Math.min(FLOWS_IN_FLIGHT, s.flows - added);
      await Promise.all(Array.from({ length: wave }, (_, i) => producer.add(flowOf(10, added + i))));
      added += wave;
    }
    const rate = (added * 1000) / (performance.now() - t0);
    const waiter = parentsDone(added + 1);
    const workers = await side.workers(url, waiter.seen);
    try {
      await within(waiter.done, 60_000, `${added + 1} parents`);
    } finally {
      await workers.close();
    }
    const cpuUsPerFlow = (((await serverCpuSeconds(admin)) - cpu0) * 1e6) / added;
    return { rate, cpuUsPerFlow };
  } finally {
    await producer.close();
  }
}

/** flow.e2e: ms from adding a parent with 100 children to its completion (median of e2eRuns). */
export async function flowEndToEnd(side: FlowSide, url: string, s: FlowSizes): Promise<number> {
  const producer = side.producer(url);
  let current: { tag: number; done: () => void } | undefined;
  const workers = await side.workers(url, (data) => {
    if (current && data.tag === current.tag) current.done();
  });
  try {
    await producer.add(flowOf(1, -1)); // connect and load outside the timing
    const times: number[] = [];
    for (let run = 0; run < s.e2eRuns; run++) {
      const finished = new Promise<void>((resolve) => (current = { tag: run, done: resolve }));
      const t0 = performance.now();
      await producer.add(flowOf(100, run));
      await within(finished, 30_000, `the parent of flow ${run}`);
      times.push(performance.now() - t0);
    }
    return median(times);
  } finally {
    await workers.close();
    await producer.close();
  }
}
