/**
 * glide-mq's DAGs: nodes named by the user, each waiting for the nodes its `deps` name, become one
 * node list (flow-nodes.ts) stored by one glidemq_addFlow call, as a tree is. A node's deps are its
 * children in the flow's terms, and a node named in the deps of several is a child of each: it runs
 * once, and each of them waits for it. Every refusal (a bad shape, a duplicate name, an unknown dep,
 * a cycle, an option) happens here, before anything is written, and names the node.
 */
import { InvalidArgumentError, invalid } from '../shared/errors.js';
import type { Job } from '../jobs/job.js';
import type { JobOptions } from '../producing/options.js';
import { newFlowJobId, nodeKey, type FlowJob, type FlowNode } from './flow-nodes.js';

/** The options of a DAG node's job: a flow job's (its parents are the nodes that name it in their deps). */
export type DAGJobOptions = NonNullable<FlowJob['opts']>;

/** glide-mq's DAGNode: a job of a DAG, named uniquely within it, and the names of the nodes it waits for. */
export interface DAGNode {
  /** Unique within the DAG (other nodes' deps name it); the job's name. */
  name: string;
  queueName: string;
  data?: any;
  opts?: DAGJobOptions;
  /** Names of the nodes that must complete before this one runs. */
  deps?: string[];
}

/** glide-mq's DAGFlow: what FlowProducer.addDAG takes. */
export interface DAGFlow {
  nodes: DAGNode[];
}

/**
 * A DAG whose deps go round (glide-mq's CycleError): `cycle` names its nodes, each followed by a
 * node that waits for it, and the first one again at the end.
 */
export class CycleError extends InvalidArgumentError {
  readonly cycle: string[];
  constructor(cycle: string[]) {
    super('ERR_INVALID', `dag: the nodes hold a cycle (${cycle.map((n) => `"${n}"`).join(' -> ')}): a node cannot wait for itself through its deps`, true);
    this.cycle = cycle;
  }
}

/** What adding a DAG needs of a FlowProducer. */
export interface DAGTarget {
  readonly prefix: string;
  addNodes(nodes: FlowNode[]): Promise<Map<FlowNode, Job>>;
}

/** Adds a DAG whole or not at all: a Map of each node's name to its Job. */
export async function addDAG(target: DAGTarget, flow: DAGFlow): Promise<Map<string, Job>> {
  if (typeof flow !== 'object' || flow === null) throw invalid('addDAG takes { nodes }: the DAG\'s nodes, each { name, queueName, data?, opts?, deps? }');
  const { nodes, byName } = dagToNodes(flow.nodes, target.prefix);
  return jobsByName(byName, await target.addNodes(nodes));
}

/** Each node's Job by its name. */
export function jobsByName(byName: Map<string, FlowNode>, jobs: Map<FlowNode, Job>): Map<string, Job> {
  const out = new Map<string, Job>();
  for (const [name, node] of byName) out.set(name, jobs.get(node)!);
  return out;
}

/** A job id made here: the user's jobId, else a UUID v4 (as flow-nodes.ts makes a tree's). */
export function workflowJobId(opts: JobOptions | undefined): string {
  const id = opts?.jobId;
  return id === undefined || id === '' ? newFlowJobId() : id;
}

/** Refuses what a workflow job's opts cannot hold; `label` names the job in the message. */
export function checkWorkflowOpts(opts: unknown, label: string): void {
  if (opts === undefined) return;
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) throw invalid(`${label}: opts must be an object of job options`);
  if ((opts as JobOptions).parent !== undefined) {
    throw invalid(`${label}: opts.parent is not taken here: a job's parents are the jobs that wait for it (name it in their deps)`);
  }
}

/**
 * The DAG as a node list (each node before the nodes it waits for, so the first is a node nothing
 * waits for), and each node by its name, in the order given. Checks everything first: the shapes, unique names, that
 * every dep names a node, and that no node waits for itself through its deps.
 */
export function dagToNodes(nodes: DAGNode[], prefix: string): { nodes: FlowNode[]; byName: Map<string, FlowNode> } {
  if (!Array.isArray(nodes) || nodes.length === 0) throw invalid('dag: nodes must be a non-empty array of { name, queueName, data?, opts?, deps? }');
  const defs = new Map<string, DAGNode>();
  nodes.forEach((n, i) => {
    checkShape(n, i);
    if (defs.has(n.name)) throw invalid(`dag: node "${n.name}" is named twice (again at nodes[${i}]): names are unique within a DAG`);
    defs.set(n.name, n);
  });
  const depsOf = new Map<string, string[]>();
  for (const n of nodes) {
    const deps = [...new Set(n.deps ?? [])];
    for (const d of deps) {
      if (!defs.has(d)) throw invalid(`dag: node "${n.name}" depends on "${d}", which is not a node of the DAG`);
    }
    depsOf.set(n.name, deps);
  }
  checkJobIds(nodes, prefix);
  const order = dependentsFirst(nodes, depsOf);
  const byName = new Map<string, FlowNode>(); // in the order the nodes were given
  for (const def of nodes) {
    byName.set(def.name, {
      queueName: def.queueName,
      prefix,
      id: workflowJobId(def.opts as JobOptions | undefined),
      name: def.name,
      data: def.data,
      opts: { ...(def.opts as JobOptions | undefined) },
      parents: [],
      deps: [],
    });
  }
  for (const def of order) {
    const node = byName.get(def.name)!;
    for (const d of depsOf.get(def.name)!) link(node, byName.get(d)!);
  }
  return { nodes: order.map((d) => byName.get(d.name)!), byName };
}

/** Makes `child` one of `parent`'s dependencies (the parent waits for it). */
export function link(parent: FlowNode, child: FlowNode): void {
  parent.deps.push(nodeKey(child));
  child.parents.push(nodeKey(parent));
}

/** Refuses two nodes given the same jobId in one queue (they would be one job). */
function checkJobIds(nodes: DAGNode[], prefix: string): void {
  const named = new Map<string, string>();
  for (const n of nodes) {
    const id = (n.opts as JobOptions | undefined)?.jobId;
    if (id === undefined || id === '') continue;
    const key = nodeKey({ queueName: n.queueName, prefix, id: String(id) });
    const other = named.get(key);
    if (other !== undefined) throw invalid(`dag: nodes "${other}" and "${n.name}" are both given jobId "${id}" in queue ${n.queueName}: give each its own`);
    named.set(key, n.name);
  }
}

function checkShape(n: DAGNode, i: number): void {
  if (typeof n !== 'object' || n === null || Array.isArray(n)) throw invalid(`dag: nodes[${i}] must be { name, queueName, data?, opts?, deps? }`);
  if (typeof n.name !== 'string' || n.name === '') throw invalid(`dag: nodes[${i}]: name must be a non-empty string`);
  const label = `dag: node "${n.name}"`;
  if (typeof n.queueName !== 'string' || n.queueName === '') throw invalid(`${label}: queueName must be a non-empty string`);
  if (n.deps !== undefined && (!Array.isArray(n.deps) || n.deps.some((d) => typeof d !== 'string'))) {
    throw invalid(`${label}: deps must be an array of node names`);
  }
  checkWorkflowOpts(n.opts, label);
}

/**
 * The nodes, each before every node it waits for (Kahn's walk from the nodes nothing waits for);
 * a CycleError naming one cycle when some node is never reached.
 */
function dependentsFirst(nodes: DAGNode[], depsOf: Map<string, string[]>): DAGNode[] {
  const waitedForBy = new Map<string, number>(nodes.map((n) => [n.name, 0]));
  for (const deps of depsOf.values()) for (const d of deps) waitedForBy.set(d, waitedForBy.get(d)! + 1);
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const ready = nodes.filter((n) => waitedForBy.get(n.name) === 0);
  const order: DAGNode[] = [];
  for (let i = 0; i < ready.length; i++) {
    const n = ready[i];
    order.push(n);
    for (const d of depsOf.get(n.name)!) {
      const left = waitedForBy.get(d)! - 1;
      waitedForBy.set(d, left);
      if (left === 0) ready.push(byName.get(d)!);
    }
  }
  if (order.length < nodes.length) throw new CycleError(findCycle(nodes.filter((n) => waitedForBy.get(n.name)! > 0), depsOf));
  return order;
}

/**
 * One cycle among `left` (the nodes the walk never reached): every one of them is waited for by a
 * node of `left`, so walking from any of them to a node of `left` waiting for it comes back round;
 * the walk's path from the first node met twice is the cycle.
 */
function findCycle(left: DAGNode[], depsOf: Map<string, string[]>): string[] {
  const inLeft = new Set(left.map((n) => n.name));
  const waiter = new Map<string, string>();
  for (const n of left) for (const d of depsOf.get(n.name)!) if (inLeft.has(d) && !waiter.has(d)) waiter.set(d, n.name);
  const path: string[] = [];
  const seen = new Map<string, number>();
  let at = left[0].name;
  while (!seen.has(at)) {
    seen.set(at, path.length);
    path.push(at);
    at = waiter.get(at)!;
  }
  const cycle = path.slice(seen.get(at)!);
  return [...cycle, cycle[0]];
}
