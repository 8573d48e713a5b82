/**
 * BullMQ's FlowProducer: adds a tree of jobs (children in any queue) whole or not at all, and reads
 * one back (getFlow). A flow is one node list (flow-nodes.ts) stored by one glidemq_addFlow call
 * (lua/flow.lua): atomic by Valkey, and numbered by the producer's once-only call numbers, so a
 * call re-sent after a lost reply stores nothing twice. Parents wait in 'waiting-children' and run
 * once, after their last child settled. On a cluster, a flow whose queues span several hash slots
 * is stored in parts with a journal that maintenance rolls forward (flow-journal.ts).
 */
import { acquireClient, closeClient, type Acquired, type Client, type ConnectionInput } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import { ReadyConnection } from '../connecting/ready-connection.js';
import { DEFAULT_PREFIX, QueueKeys, validatePrefix } from '../shared/keys.js';
import { SafeEmitter } from '../shared/safe-emitter.js';
import { invalid } from '../shared/errors.js';
import { Job, type JobQueueHandle } from '../jobs/job.js';
import { addedFields, DEFAULT_MAX_PAYLOAD } from '../producing/options.js';
import { Producer } from '../producing/producer.js';
import { checkConfirm, confirmedCall, pickConfirm, type Confirm, type ConfirmOptions } from '../producing/confirm.js';
import { addInParts, needsParts } from './flow-journal.js';
import { encodeNodes, nodeKey, nodeKeys, treeToNodes, type EncodedFlow, type FlowJob, type FlowNode, type FlowOpts } from './flow-nodes.js';
import { addDAG, type DAGFlow } from './dag-nodes.js';
import { FlowCoalescer } from './flow-coalescer.js';
import { Telemetry, type TelemetryOption } from '../shared/telemetry.js';

export interface FlowProducerOptions {
  connection?: ConnectionInput;
  /** The key prefix of the flow's queues (a flow job may name its own). */
  prefix?: string;
  /** Largest accepted job data, in bytes of JSON (default 512 KiB). */
  maxPayloadBytes?: number;
  /** Confirmed writes for every flow added (README "Confirmed writes"); a flow's own `confirm` overrides it. */
  confirm?: ConfirmOptions;
  /**
   * OpenTelemetry tracing of flows (README "Tracing"): true (the global tracer provider) or
   * { tracer }; a flow is a producer span, each job's context stored for the worker's span.
   */
  telemetry?: TelemetryOption;
}

/** BullMQ's JobNode: a job of a flow and its children (left out for a job without children). */
export interface JobNode {
  job: Job;
  children?: JobNode[];
}

/** BullMQ's getFlow options: the top job, how deep to read, and how many children per job. */
export interface NodeOpts {
  id: string;
  queueName: string;
  prefix?: string;
  /** Levels of children read (default 10). */
  depth?: number;
  /** Children read per job at most (default 20). */
  maxChildren?: number;
}

/** What adding a node list needs (a FlowProducer, or a Queue adding a child). */
export interface FlowTarget {
  client: Client;
  producer: Producer;
  maxPayload: number;
  /** The add confirmed (producing/confirm.ts), or none. */
  confirm?: Confirm;
}

/** The reply of glidemq_addFlow: the server's ts stored as every job's, and whether it stored the flow (false: a resend). */
export interface FlowAdded {
  ts: number;
  created: boolean;
}

/** Stores `nodes` in one glidemq_addFlow call, numbered for once-only adds. */
export async function addNodes(t: FlowTarget, nodes: FlowNode[]): Promise<FlowAdded & Pick<EncodedFlow, 'shapes' | 'byKey'>> {
  const enc = encodeNodes(nodes);
  // a flow whose queues span several hash slots of a cluster: stored in parts (flow-journal.ts)
  if (needsParts(t.client, enc)) {
    return { ...(await addInParts(t, nodes, enc)), shapes: enc.shapes, byKey: enc.byKey };
  }
  const call = t.producer.next();
  try {
    const keys = enc.keys;
    const what = () => ({ what: `flow add of ${nodes.length} jobs (top ${nodes[0]?.queueName})` });
    const r = (await confirmedCall(t.client, 'glidemq_addFlow', keys, flowArgs(t.maxPayload, call.args, enc.groups), t.confirm, what)) as number[];
    return { ts: Number(r[0]), created: Number(r[1]) === 1, shapes: enc.shapes, byKey: enc.byKey };
  } finally {
    call.done();
  }
}

/**
 * glidemq_addFlow's ARGV: maxPayload, the producer's call head, the count, then each node's group
 * in turn, pushed into one array: a flow of 100 children sends
 * 1,200 arguments, and Array.prototype.flat and spreads each cost a copy of them.
 */
function flowArgs(maxPayload: number, head: readonly (string | number)[], groups: (string | number)[][]): (string | number)[] {
  const args: (string | number)[] = [maxPayload, ...head, groups.length];
  for (const g of groups) for (let i = 0; i < g.length; i++) args.push(g[i]);
  return args;
}

/** The Job an added node describes (the fields getJob reads back), with a handle on its queue. */
export function addedJob(n: FlowNode, shape: (string | number)[], ts: number, handle: (keys: QueueKeys) => JobQueueHandle, created = true): Job {
  const fields = addedFields(n.id, String(shape[2]), shape, ts);
  if (n.parents.length) fields.parents = n.parents.join(' ');
  const job = Job.fromFields(fields);
  job.state = n.deps.length ? 'waiting-children' : job.opts.delay ? 'delayed' : job.opts.priority ? 'prioritized' : 'waiting';
  job.queue = handle(nodeKeys(n));
  // false: the flow's jobs existed already (a resend, or ids naming existing jobs): nothing was written
  job.created = created;
  return job;
}

export class FlowProducer extends SafeEmitter {
  readonly prefix: string;
  private readonly acquired: Acquired;
  private readonly ready: ReadyConnection;
  private readonly producer = new Producer();
  private readonly maxPayload: number;
  /** The confirm option checked (undefined: flows are not confirmed unless one asks). */
  readonly confirm: Confirm | undefined;
  private closing: Promise<void> | undefined;
  /** The producer hashes this producer's calls wrote (one per flow top queue), dropped at close. */
  private readonly producerKeys = new Set<string>();
  /** The telemetry option checked: tracing is on (@opentelemetry/api is loaded at the first flow). */
  private readonly telemetry: Telemetry | undefined;
  /** The adds of one turn of the event loop, stored in one call (flow-coalescer.ts). */
  private readonly coalescer = new FlowCoalescer<JobNode>(() => this.client, (lists) => this.store(lists, undefined));

  constructor(opts: FlowProducerOptions = {}) {
    const confirm = checkConfirm(opts.confirm);
    const telemetry = Telemetry.of(opts.telemetry, 'FlowProducer');
    super();
    this.telemetry = telemetry;
    this.confirm = confirm;
    this.prefix = validatePrefix(opts.prefix ?? DEFAULT_PREFIX);
    this.maxPayload = opts.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD;
    this.acquired = acquireClient(opts.connection);
    this.ready = new ReadyConnection(this.acquired);
  }

  get client(): Client {
    return this.acquired.client;
  }

  /** Resolves once the library is on the server. */
  waitUntilReady(): Promise<void> {
    return this.ready.get();
  }

  /** Adds a tree: stored whole or not at all. Resolves to the tree of jobs. */
  async add(flow: FlowJob, opts: FlowOpts = {}): Promise<JobNode> {
    const nodes = treeToNodes(flow, this.prefix, opts);
    const confirm = pickConfirm(opts.confirm, this.confirm);
    // (a confirmed or traced flow is its own call: its confirmation and its span are its own)
    if (!confirm && !this.telemetry) return this.coalescer.add(nodes);
    const [tree] = await this.store([nodes], confirm);
    return tree;
  }

  /** Adds several trees in one call: all stored, or none. */
  async addBulk(flows: FlowJob[]): Promise<JobNode[]> {
    if (!Array.isArray(flows)) throw invalid('addBulk takes an array of flows');
    if (flows.length === 0) return [];
    return this.store(flows.map((f) => treeToNodes(f, this.prefix)), this.confirm);
  }

  /** Stores node lists (trees, or DAG node lists) in one call and answers each as its tree of jobs. */
  private async store(lists: FlowNode[][], confirm: Confirm | undefined): Promise<JobNode[]> {
    await this.waitUntilReady();
    const all = lists.flat();
    this.producerKeys.add(nodeKeys(all[0]).producer(this.producer.id));
    const { ts, shapes, created, byKey } = await this.addTraced(all, confirm);
    const jobs = new Map<FlowNode, Job>();
    all.forEach((n, i) => jobs.set(n, addedJob(n, shapes[i], ts, (keys) => this.handle(keys), created)));
    return lists.map((nodes) => treeOf(nodes[0], jobs, byKey));
  }

  /** Adds a node list whose links were made by the caller (the DAG helpers): a Map of each node to its Job. */
  async addNodes(nodes: FlowNode[]): Promise<Map<FlowNode, Job>> {
    await this.waitUntilReady();
    if (nodes.length) this.producerKeys.add(nodeKeys(nodes[0]).producer(this.producer.id));
    const { ts, shapes, created } = await this.addTraced(nodes, this.confirm);
    const jobs = new Map<FlowNode, Job>();
    nodes.forEach((n, i) => jobs.set(n, addedJob(n, shapes[i], ts, (keys) => this.handle(keys), created)));
    return jobs;
  }

  /** Stores `nodes` (addNodes), in a flow's producer span when tracing is on (shared/tracing.ts). */
  private async addTraced(nodes: FlowNode[], confirm: Confirm | undefined): Promise<Awaited<ReturnType<typeof addNodes>>> {
    const write = () => addNodes({ client: this.client, producer: this.producer, maxPayload: this.maxPayload, confirm }, nodes);
    if (!this.telemetry) return write();
    const tracing = this.telemetry.loaded ?? (await this.telemetry.load());
    return tracing.produceFlow(nodes, nodeKey, write, () => ({ 'glidemq.job.ids': nodes.slice(0, 128).map((n) => n.id) }));
  }

  /** glide-mq's addDAG: adds a DAG (a node may wait for several) whole or not at all; a Map of node name to Job. */
  addDAG(dag: DAGFlow): Promise<Map<string, Job>> {
    return addDAG(this, dag);
  }

  /**
   * A flow as it is now, from job `id` of `queueName` down: each job with its children (those
   * waiting, completed, failed and ignored), `depth` levels and `maxChildren` per job at most.
   * Undefined when there is no such job.
   */
  async getFlow(opts: NodeOpts): Promise<JobNode | undefined> {
    if (typeof opts !== 'object' || opts === null || typeof opts.id !== 'string' || typeof opts.queueName !== 'string') {
      throw invalid('getFlow takes {id, queueName, prefix?, depth?, maxChildren?}');
    }
    await this.waitUntilReady();
    const keys = new QueueKeys(opts.queueName, opts.prefix ?? this.prefix);
    return this.readNode(keys, opts.id, opts.depth ?? 10, opts.maxChildren ?? 20);
  }

  private async readNode(keys: QueueKeys, id: string, depth: number, maxChildren: number): Promise<JobNode | undefined> {
    const h = await this.client.hgetall(keys.job(id));
    if (!h || Object.keys(h).length === 0) return undefined;
    const job = Job.fromFields({ ...h, id });
    job.queue = this.handle(keys);
    const node: JobNode = { job };
    if (depth <= 0) return node;
    const [deps, processed, failed, ignored] = await Promise.all([
      this.client.smembers(keys.deps(id)),
      this.client.hkeys(keys.processed(id)),
      this.client.hkeys(keys.failedChildren(id)),
      this.client.hkeys(keys.ignored(id)),
    ]);
    const childKeys = [...new Set([...processed, ...failed, ...ignored, ...deps])].slice(0, Math.max(0, maxChildren));
    const children: JobNode[] = [];
    for (const key of childKeys) {
      const m = /^(.+):\{([^{}]+)\}:job:([^:\s]+)$/.exec(key);
      if (!m) continue;
      const child = await this.readNode(new QueueKeys(m[2], m[1]), m[3], depth - 1, maxChildren);
      if (child) children.push(child);
    }
    if (children.length) node.children = children;
    return node;
  }

  /** What a job of this flow needs of its queue to read and change itself (no Queue is made). */
  private handle(keys: QueueKeys): JobQueueHandle {
    return {
      client: this.client,
      keys,
      maxPayloadBytes: this.maxPayload,
      waitUntilReady: () => this.waitUntilReady(),
      emit: (event, ...args) => this.emit(event, ...args),
    };
  }

  /** Closes the connection when this producer made it (a client the caller gave stays open). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.coalescer.drain();
      await this.ready.settled();
      // as Queue.close: the replies kept for calls that all settled are never asked for again
      if (this.producer.used && this.producer.settled && this.client.status === 'ready') {
        for (const key of this.producerKeys) this.client.del(key).catch(() => undefined);
      }
      if (this.acquired.owned) await closeClient(this.client);
    })();
    return this.closing;
  }

  /** BullMQ's disconnect: the same as close. */
  disconnect(): Promise<void> {
    return this.close();
  }
}

/** The tree from `top` down, each node's Job from `jobs`, its children found in `byKey` (every node of the call by its job key). */
function treeOf(top: FlowNode, jobs: Map<FlowNode, Job>, byKey: Map<string, FlowNode>): JobNode {
  const build = (n: FlowNode): JobNode => {
    const node: JobNode = { job: jobs.get(n)! };
    const children = n.deps.map((d) => byKey.get(d)).filter((c): c is FlowNode => c !== undefined);
    if (children.length) node.children = children.map(build);
    return node;
  };
  return build(top);
}
