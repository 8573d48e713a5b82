/**
 * A flow described in JSON for `glidemq enqueue <queue> --flow <file.json>`, read and checked whole
 * before anything is written. Two shapes:
 *
 *   a tree (BullMQ's FlowJob)  {"name", "queueName"?, "data"?, "opts"?, "children"?: [trees]}
 *   a DAG (glide-mq's nodes)   {"nodes": [{"name", "queueName"?, "data"?, "opts"?, "deps"?: [names]}]}
 *
 * queueName defaults to the queue named on the command line. A DAG node's name is its handle:
 * names are unique, each dep names another node (the node runs after its deps, which are its
 * children), and the deps form no cycle. Each job's name, data and options are checked as an add
 * checks them (producing/options.ts encodeJob); options a flow job cannot take (deduplication: a
 * flow is added whole, never absorbed in part) and unknown fields are refused. A refusal names the
 * node by its path in the file (`children[1].opts.priority`, `nodes[2] "resize"`).
 */
import { readFileSync } from 'node:fs';
import { invalid } from '../engine/shared/errors.js';
import { validateQueueName } from '../engine/shared/keys.js';
import { encodeJob, FAILURE_POLICIES, type FailurePolicy, type JobOptions } from '../engine/producing/options.js';

/** A flow job's options: an add's options (no deduplication, no parent) and a child's failure policy. */
export type FlowJobOptions = Omit<JobOptions, 'parent' | 'dedup' | 'deduplication' | 'debounce'>;

/** A job's options a flow file may give (JobOptions less deduplication, and the failure policies). */
const JOB_OPTIONS = ['jobId', 'delay', 'priority', 'lifo', 'attempts', 'backoff', 'removeOnComplete', 'removeOnFail', 'keepLogs', 'timestamp', 'sizeLimit', 'group'];
const NOT_IN_A_FLOW: Record<string, string> = {
  dedup: 'a flow is added whole, so none of its jobs is deduplicated',
  deduplication: 'a flow is added whole, so none of its jobs is deduplicated',
  debounce: 'a flow is added whole, so none of its jobs is deduplicated',
  repeat: 'a flow job does not repeat (glidemq schedulers add repeating jobs)',
  parent: "a job's parent in a file is the node it is a child of (or, in a DAG, the nodes that name it in deps)",
};

export interface FlowTree {
  name: string;
  queueName: string;
  data: unknown;
  opts?: FlowJobOptions;
  children?: FlowTree[];
}

export interface DagNode {
  name: string;
  queueName: string;
  data: unknown;
  opts?: FlowJobOptions;
  deps?: string[];
}

export type FlowFile = { kind: 'tree'; tree: FlowTree; jobs: number } | { kind: 'dag'; nodes: DagNode[]; jobs: number };

/** Most jobs one flow file may hold (glidemq_addFlow's limit for one call). */
export const MAX_FLOW_JOBS = 10_000;

const TREE_FIELDS = ['name', 'queueName', 'data', 'opts', 'children'];
const DAG_FIELDS = ['name', 'queueName', 'data', 'opts', 'deps'];

/** Reads `file` (strict UTF-8 JSON) and checks it whole; `queue` is the default queueName. */
export function readFlowFile(file: string, queue: string): FlowFile {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw invalid(`--flow: cannot read ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.code === 'EISDIR' ? 'it is a directory' : e.message}`);
  }
  return parseFlow(bytes, queue, file);
}

/** Parses `bytes` (strict UTF-8 JSON, from `source`: a file's name, or stdin) and checks the flow whole. */
export function parseFlow(bytes: Buffer, queue: string, source: string): FlowFile {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw invalid(`${source}: not valid UTF-8 text`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw invalid(`${source}: not valid JSON (${(err as Error).message})`);
  }
  return checkFlow(value, queue, source);
}

/** Checks a parsed flow document whole; every refusal is one line starting with `source`. */
export function checkFlow(value: unknown, queue: string, source = 'flow'): FlowFile {
  const fail = (where: string, why: string): never => {
    throw invalid(`${source}: ${where ? `${where}: ` : ''}${why}`);
  };
  if (!isObject(value)) {
    return fail('', `a flow is an object: a tree {"name", "queueName", "data", "opts", "children"} or a DAG {"nodes": [...]}, got ${describe(value)}`);
  }
  if ('nodes' in value) {
    const extra = Object.keys(value).find((k) => k !== 'nodes');
    if (extra !== undefined) fail('', `a DAG is {"nodes": [...]} only; unknown field "${extra}" (a tree has no "nodes")`);
    return checkDag(value.nodes, queue, fail);
  }
  return checkTree(value, queue, fail);
}

type Fail = (where: string, why: string) => never;

function checkTree(root: Record<string, unknown>, queue: string, fail: Fail): FlowFile {
  let jobs = 0;
  const ids = new Set<string>();
  const visit = (node: unknown, where: string, isChild: boolean): FlowTree => {
    if (!isObject(node)) return fail(where || 'the top job', `a job is an object {"name", "queueName", "data", "opts", "children"}, got ${describe(node)}`);
    jobs += 1;
    if (jobs > MAX_FLOW_JOBS) fail('', `a flow holds at most ${MAX_FLOW_JOBS} jobs`);
    const here = where || 'the top job';
    const job = checkJob(node, TREE_FIELDS, queue, here, isChild, ids, fail);
    if (node.children === undefined) return job;
    if (!Array.isArray(node.children)) return fail(`${here}.children`, `a list of jobs, got ${describe(node.children)}`);
    const children = node.children.map((c, i) => visit(c, `${where ? `${where}.` : ''}children[${i}]`, true));
    return children.length ? { ...job, children } : job;
  };
  const tree = visit(root, '', false);
  return { kind: 'tree', tree, jobs };
}

function checkDag(nodes: unknown, queue: string, fail: Fail): FlowFile {
  if (!Array.isArray(nodes)) return fail('nodes', `a list of nodes {"name", "queueName", "data", "opts", "deps"}, got ${describe(nodes)}`);
  if (nodes.length === 0) fail('nodes', 'no nodes: a DAG has at least one');
  if (nodes.length > MAX_FLOW_JOBS) fail('nodes', `a flow holds at most ${MAX_FLOW_JOBS} jobs, got ${nodes.length}`);
  const label = (i: number) => {
    const n = nodes[i] as { name?: unknown };
    return isObject(n) && typeof n.name === 'string' ? `nodes[${i}] "${n.name}"` : `nodes[${i}]`;
  };
  const byName = new Map<string, number>();
  nodes.forEach((n, i) => {
    if (!isObject(n)) fail(label(i), `a node is an object {"name", "queueName", "data", "opts", "deps"}, got ${describe(n)}`);
    if (typeof n.name !== 'string' || n.name === '') fail(label(i), 'a node needs a "name" (a non-empty string): deps name the nodes by it');
    const first = byName.get(n.name as string);
    if (first !== undefined) fail(label(i), `the name is taken by nodes[${first}]: each node of a DAG has its own name`);
    byName.set(n.name as string, i);
  });
  // a node with a parent: some node names it among its deps
  const hasParent = new Set<string>();
  const deps: string[][] = nodes.map((n: Record<string, unknown>, i) => {
    if (n.deps === undefined) return [];
    if (!Array.isArray(n.deps) || n.deps.some((d) => typeof d !== 'string')) return fail(`${label(i)}.deps`, `a list of node names, got ${describe(n.deps)}`);
    const list = n.deps as string[];
    list.forEach((d, j) => {
      if (!byName.has(d)) fail(`${label(i)}.deps[${j}]`, `no node is named "${d}"`);
      if (d === n.name) fail(`${label(i)}.deps[${j}]`, 'a node cannot depend on itself');
      if (list.indexOf(d) !== j) fail(`${label(i)}.deps[${j}]`, `"${d}" is named twice`);
      hasParent.add(d);
    });
    return list;
  });
  const cycle = findCycle(nodes.map((n: Record<string, unknown>) => n.name as string), deps);
  if (cycle) fail('nodes', `the deps form a cycle: ${cycle.join(' -> ')} (a DAG's deps run one way)`);
  const ids = new Set<string>();
  const checked = nodes.map((n: Record<string, unknown>, i) => {
    const job = checkJob(n, DAG_FIELDS, queue, label(i), hasParent.has(n.name as string), ids, fail);
    return deps[i].length ? { ...job, deps: deps[i] } : job;
  });
  return { kind: 'dag', nodes: checked, jobs: checked.length };
}

/**
 * One cycle of the graph (node -> its deps), as the names along it with the first repeated at the
 * end, or undefined. Depth-first with an explicit stack: a long chain does not overflow.
 */
export function findCycle(names: string[], deps: string[][]): string[] | undefined {
  const index = new Map(names.map((n, i) => [n, i]));
  const state = new Array<0 | 1 | 2>(names.length).fill(0); // 0 unseen, 1 on the path, 2 done
  for (let start = 0; start < names.length; start++) {
    if (state[start] !== 0) continue;
    const path: number[] = [start];
    const next: number[] = [0];
    state[start] = 1;
    while (path.length) {
      const at = path[path.length - 1];
      const k = next[next.length - 1]++;
      if (k >= deps[at].length) {
        state[at] = 2;
        path.pop();
        next.pop();
        continue;
      }
      const to = index.get(deps[at][k])!;
      if (state[to] === 1) return [...path.slice(path.indexOf(to)), to].map((i) => names[i]);
      if (state[to] === 0) {
        state[to] = 1;
        path.push(to);
        next.push(0);
      }
    }
  }
  return undefined;
}

/** One job of the file: its fields, queue, name, data and options, checked as an add checks them. */
function checkJob(node: Record<string, unknown>, fields: string[], queue: string, where: string, isChild: boolean, ids: Set<string>, fail: Fail): FlowTree & DagNode {
  const extra = Object.keys(node).find((k) => !fields.includes(k));
  if (extra !== undefined) fail(where, `unknown field "${extra}" (a job has ${fields.map((f) => `"${f}"`).join(', ')})`);
  if (typeof node.name !== 'string' || node.name === '') fail(where, '"name" is missing: every job has a name (a non-empty string)');
  const name = node.name as string;
  let queueName = queue;
  if (node.queueName !== undefined) {
    if (typeof node.queueName !== 'string') fail(`${where}.queueName`, `a queue name, got ${describe(node.queueName)}`);
    queueName = node.queueName as string;
  }
  try {
    validateQueueName(queueName, 'queueName');
  } catch (err) {
    fail(where, (err as Error).message);
  }
  const opts = checkOptions(node.opts, where, fail);
  const { policies, add } = splitPolicies(opts);
  try {
    encodeJob(name, node.data, add);
  } catch (err) {
    fail(where, (err as Error).message);
  }
  if (policies.length && !isChild) fail(`${where}.opts.${policies[0]}`, 'a failure policy says what a child\'s failure does to its parents, and this job is no child');
  if (add.jobId) {
    const key = `${queueName} ${add.jobId}`;
    if (ids.has(key)) fail(`${where}.opts.jobId`, `"${add.jobId}" is the id of another job of this flow in queue ${queueName}`);
    ids.add(key);
  }
  return { name, queueName, data: node.data === undefined ? {} : node.data, ...(opts ? { opts } : {}) };
}

function checkOptions(opts: unknown, where: string, fail: Fail): FlowJobOptions | undefined {
  if (opts === undefined) return undefined;
  if (!isObject(opts)) return fail(`${where}.opts`, `an object of job options, got ${describe(opts)}`);
  for (const key of Object.keys(opts)) {
    if (NOT_IN_A_FLOW[key]) fail(`${where}.opts.${key}`, `not taken in a flow: ${NOT_IN_A_FLOW[key]}`);
    if (!JOB_OPTIONS.includes(key) && !(FAILURE_POLICIES as readonly string[]).includes(key)) {
      fail(`${where}.opts`, `unknown option "${key}" (a flow job takes ${[...JOB_OPTIONS, ...FAILURE_POLICIES].join(', ')})`);
    }
  }
  const set = FAILURE_POLICIES.filter((p) => {
    const v = opts[p];
    if (v !== undefined && typeof v !== 'boolean') fail(`${where}.opts.${p}`, `true or false, got ${describe(v)}`);
    return v === true;
  });
  if (set.length > 1) fail(`${where}.opts`, `${set[0]} and ${set[1]} both say what a failure does: give one`);
  return opts as FlowJobOptions;
}

/** The failure policies set, and the options an add checks. */
function splitPolicies(opts: FlowJobOptions | undefined): { policies: FailurePolicy[]; add: JobOptions } {
  const add: Record<string, unknown> = {};
  const policies: FailurePolicy[] = [];
  for (const [k, v] of Object.entries(opts ?? {})) {
    if ((FAILURE_POLICIES as readonly string[]).includes(k)) {
      if (v === true) policies.push(k as FailurePolicy);
    } else add[k] = v;
  }
  return { policies, add: add as JobOptions };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return `the text "${v.length > 30 ? `${v.slice(0, 27)}...` : v}"`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}
