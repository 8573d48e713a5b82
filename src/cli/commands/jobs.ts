/** `glidemq jobs <queue> --state s`: one state's jobs, newest first, a page at a time. */
import { Option, type Command } from 'commander';
import { completeWith } from '../completion.js';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { invalid } from '../../engine/shared/errors.js';
import { checkState, LISTABLE_STATES, listJobPage, type JobFilter, type ListableState, type ListedJob } from '../../engine/operating/job-listing.js';
import { action, withQueue } from '../context.js';
import { holdsDeadLetters } from '../../engine/operating/dead-letters.js';
import { searchJobPage } from '../../engine/operating/job-search-listing.js';
import { colour, ellipsis, fitColumn, formatClock, formatDuration, formatRelative, jobJson, plural, print, printLines, sameDay, table, timeZoneLabel } from '../output.js';

interface JobsFlags {
  state?: string;
  name?: string;
  limit: string;
  since?: string;
  page?: string;
  offset?: string;
  grep?: string;
}

/** The column each state adds after id, name, age, attempts. */
const EXTRA: Partial<Record<ListableState, string>> = { failed: 'reason', completed: 'finished', active: 'started', 'waiting-children': 'waits for' };

/** Filter flags shared by jobs, retry, promote and export: --name and --since. */
export function filterFrom(state: ListableState, f: { name?: string; since?: string }): JobFilter {
  if (f.name !== undefined && f.name === '') throw invalid('--name is empty');
  return {
    state,
    ...(f.name !== undefined ? { name: f.name } : {}),
    ...(f.since !== undefined ? { sinceMs: parseDuration(f.since, '--since') } : {}),
  };
}

/** "failed jobs named x added in the last 1h": what a listing was asked for. */
export function describeFilter(filter: JobFilter, since?: string): string {
  const when = filter.state === 'completed' || filter.state === 'failed' ? 'finished' : 'added';
  return `${filter.state} jobs${filter.name !== undefined ? ` named ${filter.name}` : ''}${since !== undefined ? ` ${when} in the last ${since}` : ''}`;
}

function extraCell(state: ListableState, { job, runAt, unprocessed }: ListedJob, now: number): string {
  switch (state) {
    case 'waiting-children':
      return unprocessed === undefined ? '' : plural(unprocessed, 'child', 'children');
    case 'failed':
      return job.failedReason ?? '';
    case 'delayed':
      return runAt === undefined ? '' : formatClock(runAt, !sameDay(runAt, now));
    case 'completed':
      return job.finishedOn ? formatRelative(job.finishedOn - now) : '';
    case 'active':
      return job.processedOn ? formatRelative(job.processedOn - now) : '';
    default:
      return '';
  }
}

export function register(program: Command): void {
  program
    .command('jobs <queue>')
    .description("one state's jobs, newest first: id, name, age, attempts, and the failure reason, the time a delayed job runs or what a parent waits for")
    .addOption(completeWith(new Option('-s, --state <state>', 'the state to list (on a dead-letter queue: failed unless given)'), LISTABLE_STATES))
    .option('-n, --name <name>', 'only jobs of this name')
    .option('--since <duration>', 'only jobs added within this long (completed, failed: finished within it), e.g. 30m, 1h, 2d')
    .option('--limit <n>', 'jobs per page', '20')
    .option('--page <n>', 'which page (1 is the newest jobs)')
    .option('--offset <n>', 'skip this many matching jobs (instead of --page)')
    .option('-g, --grep <text>', 'only jobs whose failure reason, name or data holds this text (case ignored), searched on the server')
    .addHelpText(
      'after',
      `
Newest first means: the last added (waiting, prioritized, paused), the last started (active), the
last to run (delayed), the last finished (completed, failed), the last to begin waiting for its
children (waiting-children: parents of a flow, with how many dependencies they still wait for;
glidemq flow <queue> <id> shows one's tree). The age is the time since the job
was added. --since counts back from the server's clock: a failed or completed job passes when it
finished within the span, any other job when it was added within it. --name and --since are
applied while the queue is read page by page, so a large queue is never loaded whole. With --json
each job is one line of JSON (NDJSON), with every field \`glidemq job\` shows.
--grep looks for plain text (no pattern; letters match either case) in each job's failure
reason, name and data (its JSON), on the server a bounded step at a time: only the matches are
downloaded (README "Searching jobs"); --name, --since and the paging flags apply to the matches.
On a dead-letter queue (README "Dead letters") --state may be left out: its dead letters (failed)
are listed, with the queue and job id each failed in (column "from"; --json: originalQueue,
originalJobId).

Examples:
  $ glidemq jobs emails --state failed
  $ glidemq jobs emails --state failed --since 1h --name welcome
  $ glidemq jobs emails --state delayed --limit 50 --page 2
  $ glidemq jobs reports --state waiting-children
  $ glidemq jobs emails -s failed --json | jq -r .failedReason | sort | uniq -c
  $ glidemq jobs emails --state failed --grep "connection refused"
  $ glidemq jobs emails -s waiting --grep alice@example.com --json
  $ glidemq jobs emails-dlq`,
    )
    .action(
      action(async (ctx, queue: string, f: JobsFlags) => {
        if (f.state !== undefined) checkState(f.state);
        const limit = parseInteger(f.limit, '--limit', 1, 10_000);
        if (f.page !== undefined && f.offset !== undefined) throw invalid('give --page or --offset, not both');
        const page = f.page === undefined ? undefined : parseInteger(f.page, '--page', 1);
        const offset = f.offset !== undefined ? parseInteger(f.offset, '--offset', 0) : ((page ?? 1) - 1) * limit;
        // a dead-letter queue lists its dead letters unless told otherwise; any other queue needs --state
        if (f.state === undefined && !(await withQueue(ctx, queue, holdsDeadLetters, { creates: true }))) {
          throw invalid(`required option '-s, --state <state>' not specified (${LISTABLE_STATES.join(', ')}; only a dead-letter queue lists its dead letters without it)`);
        }
        const state = f.state === undefined ? 'failed' : checkState(f.state);
        const filter = filterFrom(state, f);
        if (f.grep !== undefined && f.grep === '') throw invalid('--grep is empty');
        const grep = f.grep;
        const result = await withQueue(ctx, queue, (q) => (grep === undefined ? listJobPage(q, filter, { offset, limit }) : searchJobPage(q, filter, grep, { offset, limit })));
        const { jobs, now } = result;
        if (ctx.json) {
          printLines(jobs.map(({ job, runAt, unprocessed }) => JSON.stringify({ ...jobJson(job), ...(runAt === undefined ? {} : { runAt }), ...(unprocessed === undefined ? {} : { unprocessed }) })));
          return 0;
        }
        const what = describeFilter(filter, f.since) + (grep === undefined ? '' : ` matching "${grep}"`);
        if (jobs.length === 0) {
          print(colour.dim(offset > 0 ? `no more ${what} in ${queue} (after the first ${offset})` : `no ${what} in ${queue}`));
          return 0;
        }
        // a delayed job's time of day (and date when not today) under a heading that names the zone
        const extra = state === 'delayed' ? `runs at (${timeZoneLabel(now)})` : EXTRA[state];
        // dead letters name the queue and job they failed in (README "Dead letters")
        const from = jobs.some((l) => l.job.originalQueue !== undefined);
        const head = ['id', 'name', 'age', 'attempts', ...(from ? ['from'] : []), ...(extra ? [extra] : [])];
        const rows = jobs.map((l) => [
          ellipsis(l.job.id, 20),
          ellipsis(l.job.name, 20),
          formatDuration(Math.max(0, now - l.job.timestamp)),
          `${l.job.attemptsMade}/${l.job.opts.attempts}`,
          ...(from ? [l.job.originalQueue === undefined ? '' : ellipsis(`${l.job.originalQueue}/${l.job.originalJobId}`, 30)] : []),
          ...(extra ? [extraCell(state, l, now)] : []),
        ]);
        // the failure reason takes what is left of the width; otherwise the name gives way
        print(table({ head, rows: fitColumn(head, rows, state === 'failed' ? (from ? 5 : 4) : 1), numeric: [2, 3] }));
        const shown = `${offset + 1}-${offset + jobs.length}`;
        const of = result.total === undefined ? '' : ` of ${result.total}`;
        const next = result.more ? `; next: ${f.offset !== undefined ? `--offset ${offset + jobs.length}` : `--page ${(page ?? 1) + 1}`}` : '';
        print(colour.dim(`showing ${shown}${of} ${what}${next}`));
        return 0;
      }),
    );
}
