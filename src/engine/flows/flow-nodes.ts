/**
 * Every flow the client is given (a BullMQ tree, a job added with `parent`, and the DAG helpers'
 * node lists) becomes one list of nodes before anything is sent: `{ queue, id, name, data, opts,
 * parents, deps }`, where parents and deps are job keys. A tree node has at most one parent; a DAG
 * node may have several, which glidemq_addFlow and the settling take as they are (lua/flow.lua).
 * Ids are known before the first write (the user's jobId, else a UUID v4 made here, as BullMQ's
 * FlowProducer does), so a resend names the same jobs. Everything is checked here (shapes,
 * options, links, cycles) and again by the Lua before its first write.
 */
import type { ConfirmOptions } from '../producing/confirm.js';
import { randomBytes } from 'node:crypto';
import { invalid, NotSupportedError } from '../shared/errors.js';
import { DEFAULT_PREFIX, QueueKeys, refJobKey } from '../shared/keys.js';
import { encodeJob, encodeJobLike, withDefaults, type JobOptions, type ParentOptions } from '../producing/options.js';

/** BullMQ's FlowJob: a job of a tree, with its children (each may be in another queue). */
export interface FlowJob {
  name: string;
  queueName: string;
  data?: any;
  /** The key prefix of this job's queue (default: the FlowProducer's). */
  prefix?: string;
  opts?: Omit<JobOptions, 'parent' | 'dedup' | 'deduplication' | 'debounce'>;
  children?: FlowJob[];
}

/** BullMQ's FlowOpts: per queue name, the defaultJobOptions its jobs get. */
export interface FlowOpts {
  queuesOptions?: Record<string, { defaultJobOptions?: JobOptions }>;
  /** This flow's confirmed write (README "Confirmed writes"), over the FlowProducer's own; false: none. */
  confirm?: ConfirmOptions | false;
}

/** One job of a flow, trees and DAGs alike. */
export interface FlowNode {
  queueName: string;
  prefix: string;
  id: string;
  name: string;
  data: unknown;
  opts: JobOptions;
  /** The job keys of its parents (nodes of the flow, or existing jobs that have not finished). */
  parents: string[];
  /** The job keys of its children, each a node of the flow that names it among its parents. */
  deps: string[];
}

/**
 * The keys of each queue nodes were in, kept: a flow names a few queues for many nodes, and each
 * QueueKeys checks its name and prefix anew (a flow of 100 children made 600 of them). Bounded:
 * past KEPT_QUEUES queues it starts again.
 */
const keptKeys = new Map<string, Map<string, QueueKeys>>(); // prefix -> queue name -> keys
let keptQueues = 0;
const KEPT_QUEUES = 256;

/** The keys of a node's queue. */
export function nodeKeys(n: Pick<FlowNode, 'queueName' | 'prefix'>): QueueKeys {
  let ofPrefix = keptKeys.get(n.prefix);
  let keys = ofPrefix?.get(n.queueName);
  if (keys === undefined) {
    keys = new QueueKeys(n.queueName, n.prefix);
    if (keptQueues >= KEPT_QUEUES) {
      keptKeys.clear();
      keptQueues = 0;
      ofPrefix = undefined;
    }
    if (!ofPrefix) keptKeys.set(n.prefix, (ofPrefix = new Map()));
    ofPrefix.set(n.queueName, keys);
    keptQueues++;
  }
  return keys;
}

/** A node's job key. */
export function nodeKey(n: Pick<FlowNode, 'queueName' | 'prefix' | 'id'>): string {
  return nodeKeys(n).job(n.id);
}

/**
 * The job key of BullMQ's `parent` option: `queue` is `<prefix>:{<name>}` (glidemq's queue key),
 * `<prefix>:<name>` (BullMQ's), or a bare queue name (then `defaultPrefix`).
 */
export function parentJobKey(parent: ParentOptions, defaultPrefix: string): string {
  return refJobKey(parent, defaultPrefix);
}

/**
 * A new flow job's id (no counter: every key is known before the call): 128 random bits in
 * base64url, 22 characters. A UUID's 36 carry 122: every key, link and parents field a flow
 * stores, and every call that names the job, is 14 bytes shorter (a child's parents field then
 * stays within a hash's compact encoding for longer queue names). Never a whole number, which
 * names a numbered job, and never starting with '-', which a command line would take for an option.
 */
export function newFlowJobId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (id[0] !== '-' && !/^\d+$/.test(id)) return id;
  }
}

/** A job id made here: the user's jobId, else a new one (newFlowJobId). */
function flowJobId(opts: JobOptions | undefined): string {
  const id = opts?.jobId;
  if (id === undefined || id === '') return newFlowJobId();
  return id;
}

/**
 * A BullMQ tree as nodes, the top first and each parent before its children. `parentKey`: the
 * job key of the top's parent (an existing job), if it has one.
 */
export function treeToNodes(tree: FlowJob, defaultPrefix = DEFAULT_PREFIX, flowOpts: FlowOpts = {}, parentKey?: string): FlowNode[] {
  const out: FlowNode[] = [];
  // (returns the job key of the node it made)
  const walk = (job: FlowJob, parent: string | undefined, path: string): string => {
    if (typeof job !== 'object' || job === null) throw invalid(`flow ${path}: a flow job must be {name, queueName, data?, opts?, children?}`);
    if (typeof job.name !== 'string' || job.name === '') throw invalid(`flow ${path}: name must be a non-empty string`);
    if (typeof job.queueName !== 'string' || job.queueName === '') throw invalid(`flow ${path}: queueName must be a non-empty string`);
    if (job.children !== undefined && !Array.isArray(job.children)) throw invalid(`flow ${path}: children must be an array of flow jobs`);
    const defaults = flowOpts.queuesOptions?.[job.queueName]?.defaultJobOptions;
    const opts = withDefaults(defaults, job.opts as JobOptions | undefined);
    if ((opts as JobOptions).parent !== undefined) throw invalid(`flow ${path}: a flow job's parent is the job it is a child of: leave opts.parent out`);
    const node: FlowNode = {
      queueName: job.queueName,
      prefix: job.prefix ?? defaultPrefix,
      id: flowJobId(opts),
      name: job.name,
      data: job.data,
      opts,
      parents: parent ? [parent] : [],
      deps: [],
    };
    out.push(node);
    const key = nodeKey(node);
    (job.children ?? []).forEach((child, i) => {
      node.deps.push(walk(child, key, `${path}.children[${i}]`));
    });
    return key;
  };
  walk(tree, parentKey, 'root');
  return out;
}

/** What glidemq_addFlow takes for a node list: KEYS (queue meta keys), the node groups, and each node's encoded job. */
export interface EncodedFlow {
  keys: string[];
  groups: (string | number)[][];
  /** Each node's encodeJob group (options.ts), in node order. */
  shapes: (string | number)[][];
  /** Each node by its job key. */
  byKey: Map<string, FlowNode>;
}

/**
 * Checks a node list (each node's options, unique jobs, both ends of every link, no cycle) and
 * encodes it for glidemq_addFlow. A parent outside the list is an existing job: its queue's meta
 * key goes in KEYS too. KEYS[1] is the first node's queue.
 */
export function encodeNodes(nodes: FlowNode[]): EncodedFlow {
  if (!Array.isArray(nodes) || nodes.length === 0) throw invalid('a flow needs at least one job');
  const byKey = new Map<string, FlowNode>();
  const metaKeys: string[] = [];
  const queueIndex = new Map<string, number>();
  const indexOf = (meta: string) => {
    let i = queueIndex.get(meta);
    if (i === undefined) {
      metaKeys.push(meta);
      i = metaKeys.length;
      queueIndex.set(meta, i);
    }
    return i;
  };
  const keys = nodes.map((n) => nodeKey(n));
  const queueOf: number[] = [];
  // (by the queue's kept QueueKeys: its meta key is a string made anew at each read)
  const byQueue = new Map<QueueKeys, number>();
  nodes.forEach((n, i) => {
    if (byKey.has(keys[i])) throw invalid(`flow: job ${n.id} of queue ${n.queueName} is named twice`);
    byKey.set(keys[i], n);
    const qk = nodeKeys(n);
    let q = byQueue.get(qk);
    if (q === undefined) byQueue.set(qk, (q = indexOf(qk.meta)));
    queueOf.push(q);
  });
  // a parent of many children is asked once by each: its deps as a set, made once
  const depSets = new Map<FlowNode, Set<string>>();
  const hasDep = (parent: FlowNode, key: string) => {
    if (parent.deps.length < 8) return parent.deps.includes(key);
    let set = depSets.get(parent);
    if (!set) depSets.set(parent, (set = new Set(parent.deps)));
    return set.has(key);
  };
  nodes.forEach((n, i) => {
    const key = keys[i];
    for (const d of n.deps) {
      const child = byKey.get(d);
      if (!child || !child.parents.includes(key)) throw invalid(`flow: job ${n.id} depends on ${d}, which is not a job of the flow naming it as its parent`);
    }
    for (const p of n.parents) {
      const parent = byKey.get(p);
      if (parent) {
        if (!hasDep(parent, key)) throw invalid(`flow: job ${n.id} names ${p} as its parent, which does not list it among its dependencies`);
      } else {
        const m = /^(.+):job:[^:\s]+$/.exec(p);
        if (!m) throw invalid(`flow: job ${n.id}: parent ${p} is not a job key`);
        indexOf(`${m[1]}:meta`);
      }
    }
  });
  checkAcyclic(nodes, keys, byKey);
  const shapes: (string | number)[][] = [];
  // siblings often share one options object (a tree's children given the same opts, the
  // queue's defaultJobOptions): each such object is checked and encoded once
  const byOpts = new Map<JobOptions, (string | number)[]>();
  const groups = nodes.map((n, i) => {
    let shape: (string | number)[];
    try {
      // (the node's id apart: no copy of its options per node; encodeJob reads no parent)
      const like = byOpts.get(n.opts);
      if (like) shape = encodeJobLike(like, n.name, n.data, n.opts, n.id);
      else byOpts.set(n.opts, (shape = encodeJob(n.name, n.data, n.opts, n.id)));
    } catch (err) {
      (err as Error).message = `flow: job ${n.name} (${n.id}) of queue ${n.queueName}: ${(err as Error).message}`;
      throw err;
    }
    if (shape[8] !== '') {
      throw new NotSupportedError('ERR_NOT_SUPPORTED', `flow: job ${n.name} (${n.id}): deduplication is not supported in a flow; add the job alone, or give it a jobId`, true);
    }
    shapes.push(shape);
    const [jobId, name, json, delay, priority, lifo, attempts, stored, , , , group] = shape;
    return [queueOf[i], jobId, name, json, delay, priority, lifo, attempts, stored, group, n.parents.join(' '), n.deps.join(' ')];
  });
  return { keys: metaKeys, groups, shapes, byKey };
}

/** Refuses a node list whose dependencies hold a cycle (Kahn's walk from the leaves). */
function checkAcyclic(nodes: FlowNode[], keys: string[], byKey: Map<string, FlowNode>): void {
  const left = new Map<string, number>();
  const ready: FlowNode[] = [];
  nodes.forEach((n, i) => {
    left.set(keys[i], n.deps.length);
    if (n.deps.length === 0) ready.push(n);
  });
  let done = 0;
  while (ready.length) {
    const n = ready.pop()!;
    done++;
    for (const p of n.parents) {
      const l = left.get(p);
      if (l === undefined) continue;
      left.set(p, l - 1);
      if (l - 1 === 0) ready.push(byKey.get(p)!);
    }
  }
  if (done < nodes.length) throw invalid('flow: the jobs hold a cycle (a job depends on itself through its children)');
}

/** A job added alone with BullMQ's `parent` option, as a node whose parent is an existing job. */
export function childNode(queueName: string, prefix: string, name: string, data: unknown, opts: JobOptions): FlowNode {
  const parent = parentJobKey(opts.parent!, prefix);
  return { queueName, prefix, id: flowJobId(opts), name, data, opts: { ...opts, parent: undefined }, parents: [parent], deps: [] };
}
