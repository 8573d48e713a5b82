/** `glidemq drain`, `clean`, `obliterate`, `remove`: the commands that destroy data. */
import { Option, type Command } from 'commander';
import { completeWith } from '../completion.js';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { invalid } from '../../engine/shared/errors.js';
import { action, withQueue } from '../context.js';
import { confirmDestructive, DECLINED } from '../confirm.js';
import { print, printError, printJson, plural, warn } from '../output.js';

interface Flags {
  yes?: boolean;
  dryRun?: boolean;
  delayed?: boolean;
  state?: string;
  grace?: string;
  limit?: string;
  force?: boolean;
}

const SAFETY = `
Without a terminal these commands refuse unless --yes is given; --dry-run shows what they would do.`;

export function register(program: Command): void {
  program
    .command('drain <queue>')
    .description('remove the jobs that wait (not the active ones); --delayed also removes delayed jobs')
    .option('--delayed', 'also remove delayed jobs')
    .option('--dry-run', 'count what would be removed, change nothing')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', `${SAFETY}\n\nExamples:\n  $ glidemq drain emails --dry-run\n  $ glidemq drain emails --delayed --yes`)
    .action(
      action(async (ctx, queue: string, f: Flags) => {
        const delayed = !!f.delayed;
        // what drain takes: the waiting jobs, and the delayed ones too with --delayed
        const noun = delayed ? 'waiting or delayed job' : 'waiting job';
        const r = await withQueue(ctx, queue, async (q) => {
          const count = async () => `drain queue ${queue}: remove ${plural((await q.drain({ delayed, dryRun: true })).removed, noun)}`;
          if (!f.dryRun && !(await confirmDestructive(count, f.yes))) return undefined;
          return q.drain({ delayed, dryRun: !!f.dryRun });
        });
        if (!r) return DECLINED;
        if (ctx.json) printJson({ queue, removed: r.removed, dryRun: r.dryRun });
        else print(`${queue}: ${r.dryRun ? 'would remove' : 'removed'} ${plural(r.removed, noun)}`);
        return 0;
      }),
    );

  program
    .command('clean <queue>')
    .description('remove completed or failed jobs that finished more than --grace ago')
    .addOption(completeWith(new Option('--state <state>', 'completed or failed').makeOptionMandatory(), ['completed', 'failed']))
    .option('--grace <duration>', 'keep jobs that finished within this long', '0')
    .option('--limit <n>', 'remove at most this many')
    .option('--dry-run', 'list what would be removed, change nothing')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', `${SAFETY}\n\nExamples:\n  $ glidemq clean emails --state completed --grace 1h --yes\n  $ glidemq clean emails --state failed --dry-run --json`)
    .action(
      action(async (ctx, queue: string, f: Flags) => {
        if (f.state !== 'completed' && f.state !== 'failed') throw invalid(`--state must be completed or failed, got "${f.state}"`);
        const state = f.state;
        const grace = parseDuration(f.grace ?? '0', '--grace');
        const limit = f.limit === undefined ? undefined : parseInteger(f.limit, '--limit', 1);
        const r = await withQueue(ctx, queue, async (q) => {
          const count = async () => `remove ${plural((await q.clean(state, grace, { limit, dryRun: true })).ids.length, `${state} job`)} of ${queue}`;
          if (!f.dryRun && !(await confirmDestructive(count, f.yes))) return undefined;
          return q.clean(state, grace, { limit, dryRun: !!f.dryRun });
        });
        if (!r) return DECLINED;
        if (ctx.json) printJson({ queue, state, removed: r.ids, dryRun: r.dryRun });
        else print(`${queue}: ${r.dryRun ? 'would remove' : 'removed'} ${plural(r.ids.length, `${state} job`)}`);
        return 0;
      }),
    );

  program
    .command('obliterate <queue>')
    .description('delete every key of the queue: jobs, history, schedulers, metrics')
    .option('--force', 'even while jobs are active')
    .option('--dry-run', 'count the keys, change nothing')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', `${SAFETY}\n\nExamples:\n  $ glidemq obliterate old-queue --dry-run\n  $ glidemq obliterate old-queue --yes`)
    .action(
      action(async (ctx, queue: string, f: Flags) => {
        const r = await withQueue(ctx, queue, async (q) => {
          const count = async () => {
            const dry = await q.obliterate({ force: !!f.force, dryRun: true });
            const jobs = await q.getJobCountByTypes();
            return `obliterate queue ${queue}: delete ${plural(jobs, 'job')} (${plural(dry.keys, 'key')})`;
          };
          if (!f.dryRun && !(await confirmDestructive(count, f.yes))) return undefined;
          return q.obliterate({ force: !!f.force, dryRun: !!f.dryRun });
        });
        if (!r) return DECLINED;
        if (ctx.json) printJson({ queue, keys: r.keys, active: r.active, dryRun: r.dryRun });
        else {
          print(`${queue}: ${r.dryRun ? 'would delete' : 'deleted'} ${plural(r.keys, 'key')}`);
          if (r.dryRun && r.active > 0) warn(`${r.active} job${r.active === 1 ? ' is' : 's are'} active: obliterate needs --force`);
        }
        return 0;
      }),
    );

  program
    .command('remove <queue> <ids...>')
    .description('remove jobs by id (an active job only with --force)')
    .option('--force', 'also remove jobs that are being processed')
    .option('--dry-run', 'say which jobs would be removed, change nothing')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', `${SAFETY}\n\nExamples:\n  $ glidemq remove emails 42 43 --dry-run\n  $ glidemq remove emails 42 43 --yes`)
    .action(
      action(async (ctx, queue: string, ids: string[], f: Flags) => {
        // Every id is looked at before anything is removed: an active job (without --force) stops
        // the command with nothing removed; ids not found are named on stderr (exit 2).
        const outcome = await withQueue(ctx, queue, async (q) => {
          const states = await Promise.all(ids.map(async (id) => [id, await q.getJobState(id)] as const));
          const missing = states.filter(([, s]) => s === 'unknown').map(([id]) => id);
          const active = states.filter(([, s]) => s === 'active').map(([id]) => id);
          const found = states.filter(([, s]) => s !== 'unknown').map(([id]) => id);
          if (active.length && !f.force) {
            const them = active.length === 1 ? 'it' : 'them';
            throw invalid(`${plural(active.length, 'job')} of ${queue} being processed (${active.join(', ')}): nothing removed; wait for ${them}, or remove ${them} with --force`);
          }
          if (f.dryRun || found.length === 0) return { removed: found, missing, running: [] as string[] };
          const runningToo = active.length ? ` (${active.length} running)` : '';
          if (!(await confirmDestructive(`remove ${plural(found.length, 'job')}${runningToo} from ${queue}`, f.yes))) return undefined;
          const removed: string[] = [];
          for (const id of found) if (await q.remove(id, { force: !!f.force })) removed.push(id);
          // a job removed by retention between the look and the removal is gone all the same
          return { removed, missing: [...missing, ...found.filter((id) => !removed.includes(id))], running: active.filter((id) => removed.includes(id)) };
        });
        if (!outcome) return DECLINED;
        const { removed, missing } = outcome;
        const running = outcome.running;
        if (ctx.json) printJson({ queue, removed, missing, dryRun: !!f.dryRun, ...(running.length ? { running } : {}) });
        else print(`${queue}: ${f.dryRun ? 'would remove' : 'removed'} ${plural(removed.length, 'job')}${removed.length ? ` (${removed.join(', ')})` : ''}`);
        // a running job's worker learns it lost the claim at its next lock renewal and aborts the run
        if (running.length && !ctx.json) {
          print(`${running.join(', ')} ${running.length === 1 ? 'was' : 'were'} running: the worker is told at its next lock renewal and aborts the run`);
        }
        if (missing.length) printError(`not found in queue ${queue}: ${missing.join(', ')} (finished jobs may have been removed by retention)`);
        return missing.length ? 2 : 0;
      }),
    );
}
