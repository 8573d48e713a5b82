/** `glidemq flow <queue> <id>`: a job's flow, from the job down: each job's state, name and dependencies. */
import type { Command } from 'commander';
import { FlowProducer } from '../../engine/flows/flow-producer.js';
import { parseInteger } from '../../engine/shared/duration.js';
import { invalid } from '../../engine/shared/errors.js';
import { action, withQueue } from '../context.js';
import { flowTree, flowView, parentOf, type ViewLimits } from '../flow-view.js';
import { colour, outputWidth, print, printError, printJson, printLines, treeLines, wrapText } from '../output.js';

interface FlowFlags {
  depth: string;
  maxChildren: string;
}

/** Levels of children shown by default: a flow deeper than this says how many are below. */
export const DEFAULT_DEPTH = 5;
/** Children shown per job by default (BullMQ's getFlow reads 20). */
export const DEFAULT_MAX_CHILDREN = 20;

export function register(program: Command): void {
  program
    .command('flow <queue> <id>')
    .description("a job's flow tree: the job and its children, down the tree, each with its state and its children counted by how they settled")
    .option('--depth <n>', 'levels of children shown below the job (0: the job alone)', String(DEFAULT_DEPTH))
    .option('--max-children <n>', 'children shown per job', String(DEFAULT_MAX_CHILDREN))
    .addHelpText(
      'after',
      `
Each line is one job: its name, #id, @queue (when not its parent's), state, and for a parent
its children in brackets by how they settled, as BullMQ counts them: processed (completed),
unprocessed (not settled yet), failed (failed under failParentOnFailure or
continueParentOnFailure), ignored (failed under ignoreDependencyOnFailure); a failed job ends
with its reason. Children a limit left out are counted on a line of their own. A job that is itself a child names its parent: \`glidemq flow\` on it shows
the whole flow. --json prints the tree as nested objects {id, queue, name, state, attemptsMade,
timestamp, processedOn, finishedOn, failedReason, dependencies, children, childrenNotShown},
the top one with its parent. Exit code: 0 shown, 1 no such job, 2 bad flags or no server.

Examples:
  $ glidemq flow reports 7f3c2a1e-5d4b-4c1f-9e8a-0b1c2d3e4f5a
  $ glidemq flow reports renovate-1 --depth 1
  $ glidemq flow reports renovate-1 --max-children 100
  $ glidemq flow reports renovate-1 --json | jq '.dependencies'`,
    )
    .action(
      action(async (ctx, queue: string, id: string, f: FlowFlags) => {
        const limits: ViewLimits = {
          depth: parseInteger(f.depth, '--depth', 0, 100),
          maxChildren: parseInteger(f.maxChildren, '--max-children', 1, 10_000),
        };
        if (id === '') throw invalid('the job id is empty');
        const found = await withQueue(ctx, queue, async (q) => {
          const flows = new FlowProducer({ connection: q.client, prefix: ctx.prefix });
          try {
            const node = await flows.getFlow({ id, queueName: queue, depth: limits.depth, maxChildren: limits.maxChildren });
            return node && { view: await flowView(node, queue), parent: parentOf(node.job) };
          } finally {
            await flows.close();
          }
        });
        if (!found) {
          printError(`job ${id} not found in queue ${queue} (finished jobs may have been removed by retention)`);
          return 1;
        }
        const { view, parent } = found;
        if (ctx.json) {
          printJson({ ...view, parent });
          return 0;
        }
        printLines(treeLines(flowTree(view, limits)));
        if (parent) {
          const hint = `a child of job ${parent.id} in queue ${parent.queue}: glidemq flow ${parent.queue} ${parent.id} shows its flow`;
          for (const line of wrapText(hint, outputWidth())) print(colour.dim(line));
        }
        return 0;
      }),
    );
}
