/** `glidemq enqueue <queue> [data]` and `--ndjson` from stdin. */
import type { Command } from 'commander';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { invalid } from '../../engine/shared/errors.js';
import { MAX_PRIORITY, type DedupMode, type JobOptions } from '../../engine/producing/options.js';
import { FlowProducer, type JobNode } from '../../engine/flows/flow-producer.js';
import type { FlowJob } from '../../engine/flows/flow-nodes.js';
import { action, type CommandContext, withQueue } from '../context.js';
import { parseFlow, readFlowFile } from '../flow-file.js';
import { parseJsonArgument, parseNdjson, readStdin } from '../input.js';
import { CONFIRM_FLAG, CONFIRM_TIMEOUT_FLAG, confirmFromFlags, exitOneOnConfirmTimeout, type ConfirmFlags } from '../confirm-flag.js';
import type { ConfirmOptions } from '../../engine/producing/confirm.js';
import { info, notice, print, printJsonLine, printLines, plural, treeLines, type TreeNode } from '../output.js';

interface EnqueueFlags extends ConfirmFlags {
  name: string;
  delay?: string;
  priority?: string;
  lifo?: boolean;
  jobId?: string;
  attempts?: string;
  backoff?: string;
  dedupId?: string;
  dedupTtl?: string;
  dedupMode?: string;
  ndjson?: boolean;
  envelope?: boolean;
  flow?: string;
}

export function jobOptionsFromFlags(f: EnqueueFlags): JobOptions {
  const opts: JobOptions = {};
  if (f.delay !== undefined) opts.delay = parseDuration(f.delay, '--delay');
  if (f.priority !== undefined) opts.priority = parseInteger(f.priority, '--priority', 1, MAX_PRIORITY);
  if (f.lifo) opts.lifo = true;
  // the API reads jobId '' as "the next id" (as BullMQ does); on a command line an empty id is more
  // likely a variable that expanded to nothing, which would add a new job on every run
  if (f.jobId === '') throw invalid("job id is empty (--job-id ''): leave the flag out to get the next id");
  if (f.jobId !== undefined) opts.jobId = f.jobId;
  if (f.attempts !== undefined) opts.attempts = parseInteger(f.attempts, '--attempts', 1, 1_000_000);
  if (f.backoff !== undefined) opts.backoff = f.backoff;
  if (f.dedupId !== undefined || f.dedupTtl !== undefined || f.dedupMode !== undefined) {
    if (f.dedupId === undefined) throw invalid('--dedup-ttl and --dedup-mode need --dedup-id');
    const mode = f.dedupMode as DedupMode | undefined;
    if (mode !== undefined && !['simple', 'throttle', 'debounce'].includes(mode)) {
      throw invalid(`--dedup-mode must be simple, throttle or debounce, got "${mode}"`);
    }
    // without --dedup-mode the engine picks: throttle with a ttl, else simple
    opts.dedup = { id: f.dedupId, ...(mode ? { mode } : {}), ...(f.dedupTtl !== undefined ? { ttl: parseDuration(f.dedupTtl, '--dedup-ttl') } : {}) };
  }
  return opts;
}

export function register(program: Command): void {
  program
    .command('enqueue <queue> [data]')
    .description('add one job (data: JSON text; default: {}), many from stdin with --ndjson, or a flow from a JSON file with --flow')
    .option('-n, --name <name>', 'job name', 'default')
    .option('--delay <duration>', 'run after this long (ms, or 250ms, 5s, 2m, 1h)')
    .option('--priority <n>', `1 is served first, up to ${MAX_PRIORITY}`)
    .option('--lifo', 'serve this job before older waiting ones')
    .option('--job-id <id>', 'custom job id; an existing id adds nothing and prints that id')
    .option('--attempts <n>', 'attempts before the job fails for good')
    .option('--backoff <spec>', 'delay between attempts: fixed:<ms> or exponential:<ms>')
    .option('--dedup-id <id>', 'deduplication id: a second add with the same id is absorbed (the earlier id is printed)')
    .option('--dedup-ttl <duration>', 'deduplication window (throttle: required; simple: caps it; debounce: quiet period)')
    .option('--dedup-mode <mode>', 'simple (while the earlier job is unfinished) | throttle (for the ttl) | debounce (replace the delayed job) (default: throttle with --dedup-ttl, else simple)')
    .option('--ndjson', 'read jobs from stdin, one JSON document per line')
    .option('--envelope', 'with --ndjson: each line is {"name", "data", "opts"}')
    .option(...CONFIRM_FLAG)
    .option(...CONFIRM_TIMEOUT_FLAG)
    .option('--flow <file.json>', 'add a flow described in a JSON file (- reads stdin): a tree {"name", "queueName", "data", "opts", "children"} or a DAG {"nodes": [...]}, checked whole first')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq enqueue emails '{"to":"ann@example.com"}'
  $ glidemq enqueue reports --delay 5m --attempts 3 --backoff exponential:1000
  $ glidemq enqueue urgent '{}' --priority 1 --json
  $ glidemq enqueue sync '{"user":7}' --dedup-id user-7 --dedup-ttl 1m
  $ glidemq enqueue reindex '{"doc":3}' --delay 10s --dedup-id doc-3 --dedup-mode debounce
  $ cat jobs.ndjson | glidemq enqueue imports --ndjson
  $ printf '{"name":"resize","data":{"w":64},"opts":{"priority":2}}\\n' | glidemq enqueue images --ndjson --envelope
  $ glidemq enqueue reports --flow flow.json          a parent and its children

Every line of --ndjson input is checked before anything is written: a bad line exits 2 naming
its number, and nothing is enqueued.

--flow adds a flow described in a JSON file, as BullMQ's FlowProducer.add takes it: a job
{"name", "queueName", "data", "opts", "children": [jobs]}, where a job's queueName defaults to
<queue> and its children run before it (in any queue). The file is checked whole before anything
is written (unknown fields, names, options, ids used twice): a problem exits 2 in one line naming
its place in the file, and nothing is added. The flow is stored whole or not at all. Output: one
line per job, "<id>  <name>", indented as in the file (the top job's id first); --json: the
tree of {"id", "queue", "name", "children"}. The file may instead be a DAG, as glide-mq's addDAG
takes it: {"nodes": [{"name", "queueName", "data", "opts", "deps": [names]}]}, where a node runs
after the nodes its deps name and may be a dep of several; names are unique, and an unknown dep or
a cycle is refused. Output: "<id>  <name>" per node in the file's order; --json:
{"nodes": {"<name>": {"id", "queue"}}}.

  $ cat flow.json
  {"name": "report", "children": [
    {"name": "fetch", "queueName": "sources", "data": "sales"},
    {"name": "fetch", "queueName": "sources", "data": "costs",
     "opts": {"failParentOnFailure": true}}]}
  $ glidemq enqueue reports --flow flow.json --json | jq -r .id
  $ generate-flow | glidemq enqueue reports --flow -
  $ echo '{"nodes":[{"name":"a"},{"name":"b"},{"name":"c","deps":["a","b"]}]}' |
      glidemq enqueue etl --flow - --json`,
    )
    .action(
      action(async (ctx, queue: string, data: string | undefined, flags: EnqueueFlags) => {
        const opts = jobOptionsFromFlags(flags);
        const confirm = confirmFromFlags(flags);
        // a confirmation that did not hold: exit 1 (CLI.md), whatever the kind of add
        return exitOneOnConfirmTimeout(async () => {
        if (flags.flow !== undefined) return enqueueFlow(ctx, queue, flags.flow, { data, opts, flags, confirm });
        if (flags.envelope && !flags.ndjson) throw invalid('--envelope only applies with --ndjson');
        if (flags.ndjson) {
          if (data !== undefined) throw invalid('give either data or --ndjson input on stdin, not both');
          const lines = parseNdjson(await readStdin(), !!flags.envelope, { name: flags.name, opts });
          await withQueue(ctx, queue, async (q) => {
            let added;
            try {
              added = await q.addBulkIds(lines, { confirm });
            } catch (err) {
              const index = (err as { index?: number }).index;
              if (index !== undefined) throw invalid(`line ${lines[index - 1].line}: ${(err as { reason?: string }).reason}`);
              throw err;
            }
            // codes: 1 created, 0 the job id existed, 2 deduplicated, 3 debounced (Queue.addBulkIds)
            const { ids, codes } = added;
            const out = ctx.json
              ? ids.map((id, i) => JSON.stringify({ id, queue, name: lines[i].name, created: codes[i] === 1, ...dedupField({ deduplicated: DEDUP_CODES[codes[i]] }) }))
              : ids;
            for (let i = 0; i < out.length; i += 10_000) printLines(out.slice(i, i + 10_000));
            const existed = codes.filter((c) => c === 0).length;
            info(`enqueued ${plural(ids.length - existed, 'job')} to ${queue}`);
            if (existed > 0 && !ctx.json) notice(`${plural(existed, 'job')} already existed (their job ids were taken): nothing added for ${existed === 1 ? 'it' : 'them'}`);
          }, { creates: true });
          return 0;
        }
        const payload = data === undefined ? {} : parseJsonArgument(data, 'data');
        await withQueue(ctx, queue, async (q) => {
          const job = await q.add(flags.name, payload, confirm ? { ...opts, confirm } : opts);
          if (ctx.json) printJsonLine({ id: job.id, queue, name: job.name, created: job.created, ...dedupField(job) });
          else print(job.id);
          if (job.deduplicated) info(`deduplicated (${job.deduplicated}): ${job.id} is the earlier job's id`);
          // the id is printed either way (a script reads it); that nothing was added goes to stderr
          else if (job.created === false && !ctx.json) notice(`job ${job.id} already existed in ${queue}: nothing added (--job-id names an existing job)`);
        }, { creates: true });
        return 0;
        });
      }),
    );
}

/**
 * `--flow <file>`: the file read and checked whole (flow-file.ts), then added in one call. The
 * flags of one job (data, --name, job options) and --ndjson do not go with it: each job of the file
 * has its own.
 */
async function enqueueFlow(ctx: CommandContext, queue: string, file: string, given: { data?: string; opts: JobOptions; flags: EnqueueFlags; confirm?: ConfirmOptions }): Promise<number> {
  if (given.data !== undefined) throw invalid('give either data or --flow, not both: each job of the flow file has its own data');
  if (given.flags.ndjson || given.flags.envelope) throw invalid(`give either --${given.flags.ndjson ? 'ndjson' : 'envelope'} or --flow, not both`);
  const flag = Object.keys(given.opts)[0];
  if (flag !== undefined || given.flags.name !== 'default') {
    throw invalid(`--${flag === undefined ? 'name' : OPTION_FLAGS[flag] ?? flag} is for one job: with --flow, each job of the file has its own name and "opts"`);
  }
  const flow = file === '-' ? parseFlow(await readStdin(), queue, 'stdin') : readFlowFile(file, queue);
  const added = await withQueue(
    ctx,
    queue,
    async (q) => {
      const flows = new FlowProducer({ connection: q.client, prefix: ctx.prefix, confirm: given.confirm });
      try {
        return flow.kind === 'tree' ? await flows.add(flow.tree as FlowJob) : await flows.addDAG({ nodes: flow.nodes });
      } finally {
        await flows.close();
      }
    },
    { creates: true },
  );
  // a flow whose jobs existed already (ids in the file naming existing jobs) stored nothing
  const existed = 'job' in added ? added.job.created === false : [...added.values()].some((j) => j.created === false);
  if (added instanceof Map) {
    // a DAG: each node's job by the node's name, in the file's order
    const nodes = [...added].map(([node, job]) => ({ node, id: job.id, queue: job.queueName ?? queue }));
    if (ctx.json) printJsonLine({ nodes: Object.fromEntries(nodes.map((n) => [n.node, { id: n.id, queue: n.queue }])), created: !existed });
    else printLines(nodes.map((n) => `${n.id}  ${n.node}${n.queue === queue ? '' : `  @${n.queue}`}`));
    if (existed) notice(`the DAG's jobs already existed in ${queue}: nothing added (the file's job ids name existing jobs)`);
    else info(`enqueued a DAG of ${plural(flow.jobs, 'job')}`);
    return 0;
  }
  const tree = addedTree(added, queue);
  if (ctx.json) printJsonLine({ ...tree, created: !existed });
  else printLines(treeLines(idTree(tree)));
  if (existed) notice(`the flow's jobs already existed (top job ${tree.id} in ${tree.queue}): nothing added (the file's job ids name existing jobs)`);
  else info(`enqueued a flow of ${plural(flow.jobs, 'job')} (top job ${tree.id} in ${tree.queue})`);
  return 0;
}

/** A flow as added: each job's id, queue and name, children nested (--json). */
interface AddedJob {
  id: string;
  queue: string;
  name: string;
  children: AddedJob[];
}

function addedTree(node: JobNode, queue: string): AddedJob {
  const here = node.job.queueName ?? queue;
  return { id: node.job.id, queue: here, name: node.job.name, children: (node.children ?? []).map((c) => addedTree(c, here)) };
}

/** The lines of an added flow: `<id>  <name>`, and `@queue` when not its parent's. */
function idTree(job: AddedJob, parentQueue?: string): TreeNode {
  const where = job.queue === parentQueue ? '' : `  @${job.queue}`;
  return { text: `${job.id}  ${job.name}${where}`, children: job.children.map((c) => idTree(c, job.queue)) };
}

/** The flag that sets each job option (the refusal of one with --flow names the flag). */
const OPTION_FLAGS: Record<string, string> = { jobId: 'job-id', dedup: 'dedup-id' };

const DEDUP_CODES: Record<number, string | undefined> = { 2: 'blocked', 3: 'debounced' };

function dedupField(job: { deduplicated?: string }): { deduplicated?: string } {
  return job.deduplicated ? { deduplicated: job.deduplicated } : {};
}
