/** `glidemq schedulers <queue>` (list), `schedulers add`, `schedulers remove`. */
import type { Command } from 'commander';
import { invalid } from '../../engine/shared/errors.js';
import { buildRecord, type SchedulerInfo, type SchedulerTiming } from '../../engine/scheduling/schedulers.js';
import { allowNewQueue, confirmDestructive, CREATE_FLAG, DECLINED } from '../confirm.js';
import { action, withQueue } from '../context.js';
import { parseJsonArgument } from '../input.js';
import { colour, formatDuration, formatTime, print, printJson, table } from '../output.js';
import { jobOptionsFromFlags } from './enqueue.js';

interface AddFlags {
  cron?: string;
  every?: string;
  tz?: string;
  data?: string;
  jobName?: string;
  priority?: string;
  lifo?: boolean;
  attempts?: string;
  backoff?: string;
  create?: boolean;
}

interface RemoveFlags {
  yes?: boolean;
  dryRun?: boolean;
}

export function register(program: Command): void {
  const cmd = program
    .command('schedulers')
    .description('list, add and remove the schedulers of a queue (cron patterns and fixed intervals)')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq schedulers emails               list (same as: schedulers list emails)
  $ glidemq schedulers add emails digest --cron '0 8 * * MON-FRI' --tz Europe/Berlin
  $ glidemq schedulers add reports nightly --every 1d --data '{"kind":"daily"}'
  $ glidemq schedulers add emails heartbeat --every 5m
  $ glidemq schedulers remove emails digest --yes`,
    );

  cmd
    .command('list <queue>', { isDefault: true })
    .description('the schedulers of a queue, the one due first first')
    .addHelpText('after', `\nExamples:\n  $ glidemq schedulers list emails\n  $ glidemq schedulers emails --json | jq '.[].nextRun'`)
    .action(
      action(async (ctx, queue: string) => {
        const list = await withQueue(ctx, queue, (q) => q.getSchedulers());
        if (ctx.json) {
          printJson(list);
          return 0;
        }
        if (list.length === 0) {
          print(colour.dim(`queue ${queue} has no schedulers`));
          return 0;
        }
        const now = Date.now();
        // the job name column only when some scheduler names its jobs otherwise than itself
        const named = list.some((s) => s.template.name !== s.name);
        print(
          table({
            head: ['name', 'schedule', 'next run', 'last run', ...(named ? ['job'] : []), 'last job'],
            rows: list.map((s) => [
              s.name,
              schedule(s),
              `${formatTime(s.nextRun)} (${relative(s.nextRun - now)})`,
              s.lastRun !== undefined ? formatTime(s.lastRun) : '-',
              ...(named ? [s.template.name] : []),
              s.lastJobId ?? '-',
            ]),
            wrap: [1, 2, 3],
          }),
        );
        return 0;
      }),
    );

  cmd
    .command('add <queue> <name>')
    .description('add a scheduler, or update the one with that name (an unchanged timing keeps its next run)')
    .option('--cron <pattern>', "five-field cron pattern, e.g. '*/15 9-17 * * MON-FRI' (or @hourly, @daily, ...)")
    .option('--every <duration>', 'fixed interval (ms, or 30s, 5m, 1h), counted from now')
    .option('--tz <zone>', 'time zone of the cron pattern, an IANA name (default: UTC)')
    .option('--data <json>', 'data of each job (JSON text)', '{}')
    .option('--job-name <name>', 'name of each job (default: the scheduler name)')
    .option('--priority <n>', 'priority of each job (1 is served first)')
    .option('--lifo', 'each job is served before older waiting ones')
    .option('--attempts <n>', 'attempts of each job')
    .option('--backoff <spec>', 'delay between attempts: fixed:<ms> or exponential:<ms>')
    .option(...CREATE_FLAG)
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq schedulers add reports nightly --cron '30 2 * * *' --tz America/New_York
  $ glidemq schedulers add emails heartbeat --every 5m --data '{"ping":true}' --json
  $ glidemq schedulers add new-queue heartbeat --every 1m --create

A worker of the queue fires it from its promotion tick. After downtime a missed run fires once,
then the next run moves to the next slot after now.`,
    )
    .action(
      action(async (ctx, queue: string, name: string, flags: AddFlags) => {
        if ((flags.cron === undefined) === (flags.every === undefined)) throw invalid('give exactly one of --cron or --every');
        if (flags.tz !== undefined && flags.cron === undefined) throw invalid('--tz applies only with --cron');
        const timing: SchedulerTiming = flags.cron !== undefined ? { pattern: flags.cron, ...(flags.tz ? { tz: flags.tz } : {}) } : { every: flags.every };
        const data = parseJsonArgument(flags.data ?? '{}', '--data');
        const opts = jobOptionsFromFlags({ name: name, priority: flags.priority, lifo: flags.lifo, attempts: flags.attempts, backoff: flags.backoff });
        const s = await withQueue(
          ctx,
          queue,
          async (q) => {
            const template = { name: flags.jobName ?? name, data, opts };
            await buildRecord(name, timing, template, () => q.serverTime()); // bad input is told before any question
            return (await allowNewQueue(q, ctx, flags.create)) ? q.upsertScheduler(name, timing, template) : undefined;
          },
          { creates: true },
        );
        if (!s) return DECLINED;
        if (ctx.json) printJson(s);
        else print(`scheduler ${s.name} on ${queue}: ${schedule(s)}, next run ${formatTime(s.nextRun)} (${relative(s.nextRun - Date.now())})`);
        return 0;
      }),
    );

  cmd
    .command('remove <queue> <name>')
    .description('remove a scheduler (jobs it already added stay)')
    .option('-y, --yes', 'do not ask for confirmation (needed when there is no terminal)')
    .option('--dry-run', 'show what would be removed, change nothing')
    .addHelpText('after', `\nExamples:\n  $ glidemq schedulers remove emails heartbeat\n  $ glidemq schedulers remove emails heartbeat --yes --json`)
    .action(
      action(async (ctx, queue: string, name: string, flags: RemoveFlags) =>
        withQueue(ctx, queue, async (q) => {
          const s = await q.getScheduler(name);
          if (!s) throw invalid(`queue ${queue} has no scheduler named "${name}"`);
          if (flags.dryRun) {
            if (ctx.json) printJson({ queue, name, removed: false, dryRun: true, scheduler: s });
            else print(`would remove scheduler ${name} from ${queue} (${schedule(s)}, next run ${formatTime(s.nextRun)})`);
            return 0;
          }
          if (!(await confirmDestructive(`remove scheduler ${name} (${schedule(s)}) from queue ${queue}`, flags.yes))) return DECLINED;
          const removed = await q.removeScheduler(name);
          if (ctx.json) printJson({ queue, name, removed });
          else print(removed ? `removed scheduler ${name} from ${queue}` : `scheduler ${name} was already gone`);
          return 0;
        }),
      ),
    );
}

function schedule(s: SchedulerInfo): string {
  if (s.pattern !== undefined) return `cron ${s.pattern}${s.tz ? ` (${s.tz})` : ' (UTC)'}`;
  return `every ${formatDuration(s.every ?? 0)}`;
}

/** When it runs next, against now: `in 5m`, or `5m overdue` (no worker fired it yet). */
function relative(ms: number): string {
  return ms >= 0 ? `in ${formatDuration(ms)}` : `${formatDuration(-ms)} overdue`;
}
