/**
 * glide-mq's workflow helpers, in its shapes: dag(nodes, connection), and chain, group and chord
 * in one queue. Each is one node list stored by one glidemq_addFlow call (a FlowProducer's
 * addNodes), so it runs on the same engine as a tree: stored whole or not at all, each parent
 * running once after its last dependency settled and reading their values by getChildrenValues().
 * Everything is checked before a connection is made. As glide-mq's, each helper opens its own
 * FlowProducer and closes it once the flow is stored (the returned jobs then have no connection),
 * unless the caller gives a client to share; the answer carries a close() either way. A last,
 * optional argument takes glidemq's FlowProducer option `telemetry` (WorkflowOptions).
 */
import { isClient, type Client, type ConnectionInput } from '../connecting/connection.js';
import { invalid } from '../shared/errors.js';
import { DEFAULT_PREFIX, validatePrefix } from '../shared/keys.js';
import type { Job } from '../jobs/job.js';
import type { JobOptions } from '../producing/options.js';
import { FlowProducer, type JobNode } from './flow-producer.js';
import type { FlowNode } from './flow-nodes.js';
import type { TelemetryOption } from '../shared/telemetry.js';
import { checkWorkflowOpts, dagToNodes, jobsByName, link, workflowJobId, type DAGJobOptions, type DAGNode } from './dag-nodes.js';

/** glide-mq's WorkflowJobDef: a job of a chain, group or chord (all in the helper's queue). */
export interface WorkflowJobDef {
  name: string;
  data?: any;
  opts?: DAGJobOptions;
}

/**
 * How a helper reaches the server: any connection glidemq takes (a client given is shared, not
 * closed), or glide-mq's `{ ...connection, client }`, whose client is shared.
 */
export type WorkflowConnection = ConnectionInput | { client: Client };

/** What a helper answers (the tree, or the DAG's Map), with close(), which releases a shared client's producer. */
export type ClosableWorkflow<T> = T & { close(): Promise<void> };

/**
 * What a helper's FlowProducer takes beyond glide-mq's arguments (a last, optional argument):
 * `telemetry`, as FlowProducer's (README "Tracing"), so the flow is a traced `addFlow` span.
 */
export interface WorkflowOptions {
  telemetry?: TelemetryOption;
}

/** The group's parent (glide-mq's name): it waits for every job of the group and reads their values. */
export const GROUP_PARENT_NAME = '__group__';

/**
 * glide-mq's dag(): adds a DAG whole or not at all, each node waiting for the nodes its deps name.
 * Answers a Map of each node's name to its Job.
 */
export async function dag(nodes: DAGNode[], connection?: WorkflowConnection, prefix?: string, opts?: WorkflowOptions): Promise<ClosableWorkflow<Map<string, Job>>> {
  const list = dagToNodes(nodes, workflowPrefix(prefix));
  return withFlow(connection, prefix, async (flow) => jobsByName(list.byName, await flow.addNodes(list.nodes)), opts);
}

/**
 * glide-mq's chain(): the steps run one after another, the LAST first: each step is the parent of
 * the step after it in the array, so it runs once that one completed and reads its value through
 * getChildrenValues(). Answers the tree, its top (steps[0], which runs last) first.
 */
export async function chain(
  queueName: string,
  steps: WorkflowJobDef[],
  connection?: WorkflowConnection,
  prefix?: string,
  opts?: WorkflowOptions,
): Promise<ClosableWorkflow<JobNode>> {
  const nodes = stepNodes('chain', queueName, steps, prefix);
  for (let i = 0; i + 1 < nodes.length; i++) link(nodes[i], nodes[i + 1]);
  return withFlow(connection, prefix, async (flow) => {
    const jobs = await flow.addNodes(nodes);
    let tree: JobNode | undefined;
    for (let i = nodes.length - 1; i >= 0; i--) tree = tree ? { job: jobs.get(nodes[i])!, children: [tree] } : { job: jobs.get(nodes[i])! };
    return tree!;
  }, opts);
}

/**
 * glide-mq's group(): the jobs run in parallel under a parent named '__group__' (data {}), which
 * runs once all completed and reads their values through getChildrenValues(). Answers the tree,
 * the parent at its top.
 */
export async function group(
  queueName: string,
  jobs: WorkflowJobDef[],
  connection?: WorkflowConnection,
  prefix?: string,
  opts?: WorkflowOptions,
): Promise<ClosableWorkflow<JobNode>> {
  return withCallback('group', queueName, jobs, { name: GROUP_PARENT_NAME, data: {} }, connection, prefix, opts);
}

/**
 * glide-mq's chord(): the jobs run in parallel, then `callback`, their parent, runs with every
 * result (getChildrenValues()). Answers the tree, the callback at its top.
 */
export async function chord(
  queueName: string,
  jobs: WorkflowJobDef[],
  callback: WorkflowJobDef,
  connection?: WorkflowConnection,
  prefix?: string,
  opts?: WorkflowOptions,
): Promise<ClosableWorkflow<JobNode>> {
  return withCallback('chord', queueName, jobs, callback, connection, prefix, opts);
}

/** A parent (`callback`) waiting for `jobs`, all in `queueName`. */
async function withCallback(
  helper: string,
  queueName: string,
  jobs: WorkflowJobDef[],
  callback: WorkflowJobDef,
  connection: WorkflowConnection | undefined,
  prefix: string | undefined,
  opts: WorkflowOptions | undefined,
): Promise<ClosableWorkflow<JobNode>> {
  const children = stepNodes(helper, queueName, jobs, prefix);
  const [parent] = stepNodes(helper, queueName, [callback], prefix, 'callback');
  for (const c of children) link(parent, c);
  return withFlow(connection, prefix, async (flow) => {
    const added = await flow.addNodes([parent, ...children]);
    return { job: added.get(parent)!, children: children.map((c) => ({ job: added.get(c)! })) };
  }, opts);
}

/** Each job definition as a node of `queueName`, not yet linked; refuses a bad one, naming it. */
function stepNodes(helper: string, queueName: string, defs: WorkflowJobDef[], prefix: string | undefined, what = 'job'): FlowNode[] {
  if (typeof queueName !== 'string' || queueName === '') throw invalid(`${helper}: queueName must be a non-empty string`);
  if (what === 'job' && (!Array.isArray(defs) || defs.length === 0)) {
    throw invalid(`${helper}: the jobs must be a non-empty array of { name, data?, opts? }`);
  }
  const p = workflowPrefix(prefix);
  return defs.map((def, i) => {
    const at = what === 'job' ? `${helper}: jobs[${i}]` : `${helper}: ${what}`;
    if (typeof def !== 'object' || def === null || Array.isArray(def)) throw invalid(`${at} must be { name, data?, opts? }`);
    if (typeof def.name !== 'string' || def.name === '') throw invalid(`${at}: name must be a non-empty string`);
    checkWorkflowOpts(def.opts, `${at} ("${def.name}")`);
    const opts = { ...(def.opts as JobOptions | undefined) };
    return { queueName, prefix: p, id: workflowJobId(opts), name: def.name, data: def.data, opts, parents: [], deps: [] };
  });
}

function workflowPrefix(prefix: string | undefined): string {
  return validatePrefix(prefix ?? DEFAULT_PREFIX);
}

/** The connection a FlowProducer takes: glide-mq's `{ ..., client }` is its client. */
function connectionInput(connection: WorkflowConnection | undefined): ConnectionInput | undefined {
  if (isClient(connection)) return connection;
  if (typeof connection === 'object' && connection !== null && 'client' in connection && isClient(connection.client)) return connection.client;
  return connection as ConnectionInput | undefined;
}

/**
 * Runs `run` on a FlowProducer of its own and answers its value with close(): a connection the
 * helper made is closed once the flow is stored (close() then has nothing to do); a client given
 * stays open, and close() releases the producer.
 */
async function withFlow<T extends object>(
  connection: WorkflowConnection | undefined,
  prefix: string | undefined,
  run: (flow: FlowProducer) => Promise<T>,
  opts?: WorkflowOptions,
): Promise<ClosableWorkflow<T>> {
  const input = connectionInput(connection);
  const owned = !isClient(input);
  const flow = new FlowProducer({ connection: input, prefix, telemetry: opts?.telemetry });
  let value: T;
  try {
    value = await run(flow);
  } catch (err) {
    await flow.close();
    throw err;
  }
  if (owned) await flow.close();
  return Object.assign(value, { close: owned ? async () => {} : () => flow.close() });
}
