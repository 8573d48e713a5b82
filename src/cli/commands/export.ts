/** `glidemq export <queue> --state s`: jobs as NDJSON envelopes that `enqueue --ndjson --envelope` reads back. */
import { Option, type Command } from 'commander';
import { completeWith } from '../completion.js';
import { checkState, exportEnvelopes, LISTABLE_STATES } from '../../engine/operating/job-listing.js';
import { invalid } from '../../engine/shared/errors.js';
import { action, withQueue } from '../context.js';
import { info, printLines, plural } from '../output.js';
import { describeFilter, filterFrom } from './jobs.js';

interface ExportFlags {
  state?: string;
  name?: string;
  since?: string;
  keepIds?: boolean;
}

/** The states an export takes: a listing's, less a flow's waiting parents. */
const EXPORTABLE_STATES = LISTABLE_STATES.filter((s) => s !== 'waiting-children');

/** Lines written at once. */
const BATCH = 500;

export function register(program: Command): void {
  program
    .command('export <queue>')
    .description('print jobs as NDJSON {"name", "data", "opts"} lines that `enqueue --ndjson --envelope` adds again')
    .addOption(completeWith(new Option('-s, --state <state>', 'the state to export').makeOptionMandatory(), EXPORTABLE_STATES))
    .option('-n, --name <name>', 'only jobs of this name')
    .option('--since <duration>', 'only jobs added within this long (completed, failed: finished within it)')
    .option('--keep-ids', 'carry custom job ids (not the numbers the queue handed out)')
    .addHelpText(
      'after',
      `
Jobs come in the order they run (the oldest, or the next to run, first), so importing them
queues them in the same order. The options carried are the ones that decide how a job runs:
priority or LIFO, attempts, backoff, removeOnComplete/removeOnFail, keepLogs and its group (by
id). A delayed job carries the delay it has left; a job of any other state runs at once when
imported. Not carried: dedup ids (a copy would be absorbed by the original, or block it), the
application's timestamp, and, unless --keep-ids, job ids: without them every import adds new
jobs. With --keep-ids an import into a queue that still holds a job of that id adds nothing for
it (enqueue says so), which makes a repeated import safe. The output is the same with --json.

Examples:
  $ glidemq export emails --state failed > failed.ndjson
  $ glidemq export emails -s failed --since 1h |
      glidemq enqueue emails-replay --ndjson --envelope
  $ glidemq export emails -s waiting --keep-ids |
      glidemq -u redis://other:6379 enqueue emails --ndjson --envelope`,
    )
    .action(
      action(async (ctx, queue: string, f: ExportFlags) => {
        const state = checkState(f.state);
        if (!(EXPORTABLE_STATES as string[]).includes(state)) {
          throw invalid(`--state ${state} cannot be exported: a flow's parent added back as a plain job would run without its children (glidemq flow <queue> <id> shows a flow)`);
        }
        const filter = filterFrom(state, f);
        const count = await withQueue(ctx, queue, async (q) => {
          let n = 0;
          let lines: string[] = [];
          for await (const env of exportEnvelopes(q, filter, { keepIds: f.keepIds })) {
            lines.push(JSON.stringify(env));
            n++;
            if (lines.length >= BATCH) {
              printLines(lines);
              lines = [];
            }
          }
          printLines(lines);
          return n;
        });
        info(`exported ${plural(count, 'job')} (${describeFilter(filter, f.since)}) from ${queue}`);
        return 0;
      }),
    );
}
