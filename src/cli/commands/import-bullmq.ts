/** `glidemq import-bullmq <queue...>`: copies BullMQ queues' jobs, logs and schedulers into glidemq queues. */
import type { Command } from 'commander';
import { closeClient, createClient, parseUrl, redactUrl, settleTopology, type Acquired } from '../../engine/connecting/connection.js';
import { invalid } from '../../engine/shared/errors.js';
import { COUNTED, importBullmqQueue, type BullImportResult } from '../../engine/operating/bullmq-import.js';
import { RENAMED_ID_PREFIX } from '../../engine/operating/bullmq-mapping.js';
import { action, type CommandContext, describeError, withQueue } from '../context.js';
import { plural, print, printError, printJson, table, warn } from '../output.js';

interface ImportFlags {
  source?: string;
  sourcePrefix: string;
  into?: string;
  dryRun?: boolean;
  force?: boolean;
}

/** Renamed ids and skipped items shown in a text report; --json lists them all. */
const SHOWN = 5;

function describe(r: BullImportResult, where: string): void {
  const verb = r.dryRun ? 'would import' : 'imported';
  const total = COUNTED.reduce((n, s) => n + r.imported[s], 0);
  print(`${r.queue} (BullMQ at ${where}) → ${r.into}: ${verb} ${plural(total, 'item')}, ${r.present} there already${r.logLines ? `, ${plural(r.logLines, 'log line')}` : ''}`);
  // one row per state: the columns stay narrow whatever the terminal's width
  const head = ['state', 'BullMQ', r.dryRun ? 'to import' : 'imported', r.dryRun ? 'glidemq now' : 'glidemq'];
  const rows = COUNTED.map((s) => [s, String(r.source[s]), String(r.imported[s]), String(r.target[s])]);
  print(table({ head, rows, numeric: [1, 2, 3] }));
  const { numeric, others, as } = r.renamed;
  if (numeric) print(`${plural(numeric, "numeric id")} (BullMQ's own; glidemq keeps whole numbers for the ids it hands out) ${r.dryRun ? 'would be' : 'were'} renamed ${as}, e.g. 1 → ${as.replace('<id>', '1')}`);
  if (others.length) {
    const shown = others.slice(0, SHOWN).map((x) => `${x.from} → ${x.to}`).join(', ');
    print(`${plural(others.length, 'id')} holding ':', braces or whitespace ${r.dryRun ? 'would be' : 'were'} renamed ${as} (those characters as %XX): ${shown}${others.length > SHOWN ? `, … ${others.length - SHOWN} more (--json lists them all)` : ''}`);
  }
  for (const s of r.skipped.slice(0, SHOWN)) print(`not copied: ${s.id}: ${s.why}`);
  if (r.skipped.length > SHOWN) print(`not copied: … ${r.skipped.length - SHOWN} more (--json lists them all)`);
  if (!r.sourceFound) warn(`no BullMQ queue "${r.queue}" under prefix "${r.sourcePrefix}" at ${where} (is --source or --source-prefix right?)`);
  if (r.linkedQueues.length) print(`flow links name the BullMQ ${r.linkedQueues.length === 1 ? 'queue' : 'queues'} ${r.linkedQueues.join(', ')}: import ${r.linkedQueues.length === 1 ? 'it' : 'them'} too (parents' queues first), as glidemq ${r.linkedQueues.length === 1 ? 'queue' : 'queues'} of the same name`);
  if (r.dedupIds) print(`${plural(r.dedupIds, 'dedup id')} ${r.dryRun ? 'would be' : 'were'} carried over: a glidemq add with one is deduplicated while the copied job holds it`);
  if (r.activity.active) warn(`${plural(r.activity.active, 'active BullMQ job')} left where ${r.activity.active === 1 ? 'it is' : 'they are'} (its worker finishes it in BullMQ)`);
}

export function register(program: Command): void {
  program
    .command('import-bullmq <queue...>')
    .description("copy BullMQ queues' jobs (every state, logs, job schedulers) into glidemq; safe to run again")
    .option('--source <url>', 'the server that holds the BullMQ queues (default: the glidemq server, --url)')
    .option('--source-prefix <prefix>', "BullMQ's key prefix", 'bull')
    .option('--into <queue>', 'the glidemq queue to fill, for one source queue (default: the same name)')
    .option('--dry-run', 'read both sides and print what would be copied; write nothing')
    .option('--force', 'copy even while BullMQ workers are connected or jobs are active')
    .addHelpText(
      'after',
      `
Copies waiting, paused, prioritized and delayed jobs (with their run times), completed jobs (return
values) and failed jobs (reasons, stacks, attempts), with their timestamps and logs, and turns job
schedulers into glidemq schedulers. Active jobs stay with the BullMQ worker that runs them.

Flows come across as glidemq flows: a parent waiting for its children waits in glidemq for the same
children, with the values of those that completed; a child settles its parent when it finishes. A
link to another BullMQ queue names the glidemq queue of the same name: import those queues too,
parents' queues first. A job's deduplication id comes with it: a glidemq add with the same id is
deduplicated while the copied job holds it (for a ttl, for what was left of it).

A BullMQ queue on a cluster: give a cluster node's URL as --source and BullMQ's hash-tagged prefix
(e.g. --source-prefix '{bull}'); a queue name holding the hash tag ({emails}) needs --into emails.

Ids are kept where glidemq can keep them. BullMQ's own ids are whole numbers, which glidemq keeps
for ids it hands out: those, and ids holding ':', braces or whitespace, become ${RENAMED_ID_PREFIX}<id>
(the characters as %XX); the report lists them. A job whose glidemq id exists already is left as it
is, so a second run copies nothing twice. A paused BullMQ queue pauses the glidemq queue.

It refuses (exit 2) while BullMQ works on the queue: a worker connection named for it (CLIENT
LIST), or active jobs. Stop the BullMQ workers first, or pass --force.

It ends with a count per state on both sides; exit 1 when they differ.

Examples:
  $ glidemq import-bullmq emails --dry-run
  $ glidemq import-bullmq emails reports --source redis://old-host:6379 --source-prefix bull
  $ glidemq import-bullmq emails --into emails-v2 --json
  $ glidemq import-bullmq reports report-parts --source redis://node1:7000 --source-prefix '{bull}'`,
    )
    .action(
      action(async (ctx: CommandContext, queues: string[], f: ImportFlags) => {
        if (f.into !== undefined && queues.length > 1) throw invalid(`--into names one glidemq queue: give one source queue with it, not ${queues.length}`);
        if (!f.sourcePrefix) throw invalid('--source-prefix must not be empty');
        const tagged = f.into === undefined && queues.find((q) => /[{}]/.test(q));
        if (tagged) throw invalid(`BullMQ queue "${tagged}" holds a hash tag, which a glidemq queue name cannot: name the glidemq queue with --into (e.g. --into ${tagged.replace(/[{}]/g, '')})`);
        if (f.source !== undefined) parseUrl(f.source); // a bad URL is a usage error before anything connects
        const sourceSettings = f.source === undefined ? { ...ctx.connection, cluster: false } : { url: f.source, cluster: false, options: ctx.connection.options };
        const where = f.source === undefined ? ctx.where : redactUrl(f.source);
        const acquired: Acquired = { client: createClient(sourceSettings), owned: true, settings: sourceSettings };
        acquired.client.on('error', () => undefined); // a failure surfaces as the call's rejection (below)
        const results: BullImportResult[] = [];
        try {
          // an unreachable source is named as the source, not as the glidemq server
          await acquired.client.ping().catch((err: unknown) => {
            throw invalid(`BullMQ source: ${describeError(err, where)}`);
          });
          // a cluster node's URL becomes a cluster client (BullMQ on a cluster: a hash-tagged --source-prefix such as {bull})
          const source = await settleTopology(acquired);
          for (const queue of queues) {
            const into = f.into ?? queue;
            const r = await withQueue(ctx, into, (target) =>
              importBullmqQueue({ source, sourcePrefix: f.sourcePrefix, queue, target, dryRun: f.dryRun, force: f.force }),
            { creates: true });
            results.push(r);
            if (r.refused) break;
          }
        } finally {
          await closeClient(acquired.client);
        }
        if (ctx.json) {
          printJson({ queues: results });
        } else {
          for (const r of results) if (!r.refused) describe(r, where);
        }
        for (const r of results) {
          if (!r.refused && !r.matches) {
            printError(`${r.into}: the counts differ from BullMQ's ${r.dryRun ? 'once imported ' : ''}(the glidemq queue held other jobs, or some were not copied: ${ctx.json ? 'see skipped' : 'see above'})`);
          }
        }
        const refused = results.find((r) => r.refused);
        if (refused) {
          printError(refused.refused!);
          return 2;
        }
        return results.every((r) => r.matches) ? 0 : 1;
      }),
    );
}
