/**
 * `glidemq check <what> [queue...]`: health checks for cron and Kubernetes, exit 0 pass / 1 fail /
 * 2 cannot check. No queue named: every queue under the prefix. All queues are read over one
 * connection (the engine's QueueSet).
 */
import type { Command } from 'commander';
import { acquireClient, closeClient, settleTopology } from '../../engine/connecting/connection.js';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { checkBacklog, checkFailed, checkLatency, checkQueues, checkStuck, checkWorkers, type CheckName, type CheckReport, type CheckResult, type StuckClaim } from '../../engine/operating/health.js';
import { invalid } from '../../engine/shared/errors.js';
import { ensureLibrary } from '../../engine/connecting/library.js';
import { DEFAULT_MAINTENANCE } from '../../engine/administering/maintenance.js';
import { METRICS_RETENTION_MINUTES, MINUTE_MS } from '../../engine/inspecting/metrics.js';
import type { Queue } from '../../engine/queue/queue.js';
import { QueueSet } from '../../engine/operating/queue-set.js';
import { DEPS_READ, type StuckParent } from '../../engine/flows/stuck-parents.js';
import { action, type CommandContext, warnUnknownQueue } from '../context.js';
import { colour, ellipsis, formatDuration, plural, print, printJson } from '../output.js';

const EXIT_CODES = `
Queues: the ones named, or without any, every queue under the prefix (over one connection).
Exit code: 0 when the check passes on every queue, 1 when it fails on any, 2 when it cannot be
made (bad flags, no server). One line per queue says the figure read and the threshold; --json
prints {check, ok, queues}, one object per queue (check, queue, ok, actual, threshold, rule,
details). Durations: ms, or 250ms, 5s, 2m, 1h.`;

interface Spec {
  name: CheckName;
  summary: string;
  /** required: commander refuses the command without it (exit 2). */
  options: [flags: string, description: string, fallback?: string, required?: boolean][];
  help: string;
  /** Checks the flags (before any connection: a usage error is the only line) and returns the check to run. */
  parse: (flags: Record<string, string>) => (q: Queue) => Promise<CheckResult>;
}

const CHECKS: Spec[] = [
  {
    name: 'backlog',
    summary: 'fail when more than --max jobs are ready to run and wait for a worker (waiting, paused, prioritized)',
    options: [['--max <n>', 'most jobs allowed to wait', undefined, true]],
    help: `Delayed jobs are not counted: they are not due yet.

Examples:
  $ glidemq check backlog emails --max 1000
  $ glidemq check backlog emails reports --max 1000
  $ glidemq check backlog --max 1000                 every queue under the prefix
  $ glidemq check backlog emails --max 1000 --json | jq '.queues[].actual'`,
    parse: (f) => {
      const max = parseInteger(f.max, '--max', 0);
      return (q) => checkBacklog(q, max);
    },
  },
  {
    name: 'latency',
    summary: 'fail when the oldest waiting job has waited longer than --max',
    options: [['--max <d>', 'longest wait allowed, e.g. 30s or 5m', undefined, true]],
    help: `The age counts from when the job became ready to run (added, retried or promoted), by the
server's clock. A queue where no job waits passes.

Examples:
  $ glidemq check latency emails --max 2m`,
    parse: (f) => {
      const max = parseDuration(f.max, '--max');
      return (q) => checkLatency(q, max);
    },
  },
  {
    name: 'stuck',
    summary: 'fail when a claim is idle longer than --older and its worker is not alive, or a parent whose children all settled still waits',
    options: [['--older <d>', 'idle time that makes a claim or a waiting parent count, e.g. 1m', formatDuration(DEFAULT_MAINTENANCE.lockDuration)]],
    help: `A claim is a job a worker took and has not finished. A live worker renews the claims of its
running jobs, so a claim idle past the lock duration whose worker is not in the registry (see
glidemq workers) belongs to a dead worker: stalled recovery takes it back when some worker of
the queue runs it, or \`glidemq reclaim\` does now.

A parent of a flow waits in waiting-children until its last child settles, and leaves it in the
same step: one that has waited past --older although its children all finished (completed, or
failed under a failure policy, or removed) is stuck, something a crash between a child's
settlement and its parent's move could leave. The oldest 1000 waiting parents are looked at;
\`glidemq flow <queue> <id>\` shows one's tree.

Examples:
  $ glidemq check stuck emails
  $ glidemq check stuck
  $ glidemq check stuck emails --older 5m --json | jq '.queues[].details.claims[].jobId'
  $ glidemq check stuck reports --json | jq -r '.queues[].details.parents[].jobId'`,
    parse: (f) => {
      const older = parseDuration(f.older, '--older');
      return (q) => checkStuck(q, older);
    },
  },
  {
    name: 'failed',
    summary: 'fail when more than --max attempts failed in the last --since',
    options: [
      ['--max <n>', 'most failed attempts allowed', undefined, true],
      ['--since <d>', 'the window, up to 24h, counted in whole minutes', '1h'],
    ],
    help: `Failed attempts are counted from the per-minute metrics (see glidemq metrics): an attempt that
failed and was retried counts too. The window is whole minutes, the current one included.

Examples:
  $ glidemq check failed emails --max 0 --since 15m
  $ glidemq check failed emails --max 50 --since 24h`,
    parse: (f) => {
      const max = parseInteger(f.max, '--max', 0);
      const since = parseDuration(f.since, '--since');
      if (since < 1 || since > METRICS_RETENTION_MINUTES * MINUTE_MS) throw invalid(`--since must be from 1ms to 24h (the metrics keep 24 hours), got ${f.since}`);
      return (q) => checkFailed(q, max, since);
    },
  },
  {
    name: 'workers',
    summary: 'fail when fewer than --min workers are alive',
    options: [['--min <n>', 'fewest live workers allowed', '1']],
    help: `Live workers are the ones in the queue's registry (glidemq workers): a worker that stopped
without closing drops out of it within its registry ttl (30s by default).

Examples:
  $ glidemq check workers emails --min 2
  $ glidemq check workers --min 1                    every queue under the prefix`,
    parse: (f) => {
      const min = parseInteger(f.min, '--min', 0);
      return (q) => checkWorkers(q, min);
    },
  },
];

export function register(program: Command): void {
  const check = program
    .command('check')
    .description('health checks for cron and Kubernetes: backlog, latency, stuck (claims and flow parents), failed, workers (exit 0 pass, 1 fail)')
    .addHelpText(
      'after',
      `${EXIT_CODES}

Examples:
  $ glidemq check backlog emails --max 1000
  $ glidemq check latency emails --max 2m
  $ glidemq check stuck emails
  $ glidemq check failed emails --max 10 --since 15m
  $ glidemq check workers emails --min 1
  $ glidemq check stuck                    every queue under the prefix (claims and parents)`,
    );
  for (const spec of CHECKS) {
    const sub = check.command(`${spec.name} [queues...]`).description(spec.summary);
    for (const [flags, description, fallback, needed] of spec.options) {
      if (needed) sub.requiredOption(flags, description);
      else sub.option(flags, description, fallback);
    }
    sub.addHelpText('after', `\n${spec.help}\n${EXIT_CODES}`).action(
      action(async (ctx, queues: string[], flags: Record<string, string>) => {
        const run = spec.parse(flags);
        const report = await checkAll(ctx, spec.name, queues, run);
        if (ctx.json) printJson(report);
        else if (report.queues.length === 0) {
          const what = report.ok ? 'nothing to check' : 'no workers either';
          print((report.ok ? colour.dim : colour.red)(`no queues under prefix "${ctx.prefix}" at ${ctx.where}: ${what}`));
        }
        else for (const r of report.queues) print(`${r.ok ? colour.green('pass') : colour.red('FAIL')}  ${r.check} ${r.queue}: ${describe(r)}`);
        return report.ok ? 0 : 1;
      }),
    );
  }
}

/** Runs the check on the named queues (or every queue under the prefix) over one connection. */
async function checkAll(ctx: CommandContext, name: CheckName, named: string[], run: (q: Queue) => Promise<CheckResult>): Promise<CheckReport> {
  const acquired = acquireClient(ctx.connection);
  try {
    const client = await settleTopology(acquired); // a plain URL naming a cluster node scans every primary
    await ensureLibrary(client);
    const set = new QueueSet(client, ctx.prefix, named);
    try {
      (await set.missing()).forEach((q) => warnUnknownQueue(ctx, q));
      return await checkQueues(set, name, run);
    } finally {
      await set.close();
    }
  } finally {
    await closeClient(acquired.client);
  }
}

/** Parents stuck in waiting-children, in words: how many, and the first ones by id and wait. */
function describeParents(count: number, parents: StuckParent[]): string {
  const ids = ellipsis(parents.map((p) => `${p.jobId} (${formatDuration(p.waitingMs)})`).join(', '), 120);
  return `${plural(count, 'parent')} still waiting for children that all settled (max 0): ${ids}`;
}

/** actual vs threshold in words. */
function describe(r: CheckResult): string {
  const d = r.details;
  switch (r.check) {
    case 'backlog':
      return `${plural(r.actual, 'job')} ready to run (max ${r.threshold})`;
    case 'latency':
      return d.waiting ? `the oldest waiting job has waited ${formatDuration(r.actual)} (max ${formatDuration(r.threshold)})` : `no job waits (max ${formatDuration(r.threshold)})`;
    case 'stuck': {
      const claims = d.claims as StuckClaim[];
      const jobs = claims.length ? `: ${ellipsis(claims.map((c) => `${c.jobId} (${formatDuration(c.idleMs)}, ${c.consumer})`).join(', '), 120)}` : '';
      const said = `${plural(Number(d.stuckClaims ?? r.actual), 'claim')} idle over ${formatDuration(Number(d.olderMs))} without a live worker (max 0)${jobs}`;
      const parents = Number(d.stuckParents) > 0 ? `; ${describeParents(Number(d.stuckParents), d.parents as StuckParent[])}` : '';
      const unchecked = Number(d.parentsUnchecked) > 0 ? `; ${plural(Number(d.parentsUnchecked), 'parent')} with over ${DEPS_READ} children not looked at` : '';
      return `${said}${parents}${unchecked}`;
    }
    case 'failed':
      return `${plural(r.actual, 'failed attempt')} in the last ${plural(Number(d.minutes), 'minute')} (max ${r.threshold})`;
    case 'workers':
      return `${plural(r.actual, 'live worker')} (min ${r.threshold})`;
  }
}
