/**
 * A job's place in a flow as `glidemq flow` and `glidemq job` show it: its parent (queue and id),
 * its dependencies counted by how they settled (BullMQ's getDependenciesCount), and the tree
 * FlowProducer.getFlow reads, as plain objects for --json and as lines for people.
 */
import type { Job } from '../engine/jobs/job.js';
import type { JobNode } from '../engine/flows/flow-producer.js';
import { parseQueueKey } from '../engine/shared/keys.js';
import { colour, plural, status, type TreeNode } from './output.js';

/** A parent's dependencies by how they settled (BullMQ's names); every kind, 0 when none. */
export interface DependencyCounts {
  processed: number;
  unprocessed: number;
  ignored: number;
  failed: number;
}

/** The dependency kinds in the order they are said. */
const KINDS: (keyof DependencyCounts)[] = ['processed', 'unprocessed', 'failed', 'ignored'];

export async function dependencyCounts(job: Job): Promise<DependencyCounts> {
  const c = await job.getDependenciesCount();
  return { processed: c.processed ?? 0, unprocessed: c.unprocessed ?? 0, ignored: c.ignored ?? 0, failed: c.failed ?? 0 };
}

export function totalOf(c: DependencyCounts): number {
  return c.processed + c.unprocessed + c.ignored + c.failed;
}

/** `2 processed, 1 unprocessed`: the kinds that are not 0 ('' when it has none). */
export function describeCounts(c: DependencyCounts): string {
  return KINDS.filter((k) => c[k] > 0)
    .map((k) => `${c[k]} ${k}`)
    .join(', ');
}

/** A child's (first) parent, by queue name and job id; null for a job that is no child. */
export function parentOf(job: Job): { id: string; queue: string } | null {
  if (!job.parent) return null;
  const q = parseQueueKey(job.parent.queueKey);
  return { id: job.parent.id, queue: q?.queue ?? job.parent.queueKey };
}

/** The name of the queue `job` was read from (`fallback` when the job does not say). */
function queueOf(job: Job, fallback: string): string {
  return job.queueName ?? fallback;
}

/** One job of a flow as --json prints it; children nested. */
export interface FlowView {
  id: string;
  queue: string;
  name: string;
  state: string;
  attemptsMade: number;
  timestamp: number;
  processedOn: number | null;
  finishedOn: number | null;
  failedReason: string | null;
  dependencies: DependencyCounts;
  children: FlowView[];
  /** Children it has that are not in `children`: below --depth, over --max-children, or no longer stored. */
  childrenNotShown: number;
}

/** Why children were left out of a view: what the reader was asked for. */
export interface ViewLimits {
  depth: number;
  maxChildren: number;
}

/**
 * The view of `node` (a getFlow answer) whose job is in `queue` unless it says otherwise: each
 * job's dependency counts read too, children in a stable order (name, then id).
 */
export async function flowView(node: JobNode, queue: string): Promise<FlowView> {
  const job = node.job;
  const here = queueOf(job, queue);
  const [dependencies, children] = await Promise.all([dependencyCounts(job), Promise.all((node.children ?? []).map((c) => flowView(c, here)))]);
  children.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id, undefined, { numeric: true }));
  return {
    id: job.id,
    queue: here,
    name: job.name,
    state: job.state,
    attemptsMade: job.attemptsMade,
    timestamp: job.timestamp,
    processedOn: job.processedOn ?? null,
    finishedOn: job.finishedOn ?? null,
    failedReason: job.failedReason ?? null,
    dependencies,
    children,
    childrenNotShown: Math.max(0, totalOf(dependencies) - children.length),
  };
}

/**
 * `view` as a tree to draw: each job's name, id, queue (when not its parent's; the top job's is the
 * one asked for), state, dependency counts and failure reason.
 */
export function flowTree(view: FlowView, limits: ViewLimits, parentQueue = view.queue, level = 0): TreeNode {
  const counts = describeCounts(view.dependencies);
  const where = view.queue === parentQueue ? '' : ` @${view.queue}`;
  const reason = view.state === 'failed' && view.failedReason ? `: ${view.failedReason}` : '';
  const text = `${view.name} #${view.id}${where}  ${view.state}${counts ? ` (${counts})` : ''}${reason}`;
  const styled = `${view.name} ${colour.dim(`#${view.id}${where}`)}  ${status(view.state)}${counts ? colour.dim(` (${counts})`) : ''}${reason}`;
  const children = view.children.map((c) => flowTree(c, limits, view.queue, level + 1));
  if (view.childrenNotShown > 0) {
    const n = view.childrenNotShown;
    const why =
      level >= limits.depth
        ? `below --depth ${limits.depth}`
        : totalOf(view.dependencies) > limits.maxChildren
          ? `over --max-children ${limits.maxChildren}`
          : 'no longer stored (removed after they finished)';
    const note = view.children.length ? `… ${plural(n, 'more child', 'more children')} ${why}` : `… ${plural(n, 'child', 'children')} ${why}`;
    children.push({ text: note, styled: colour.dim(note), children: [] });
  }
  return { text, styled, children };
}
