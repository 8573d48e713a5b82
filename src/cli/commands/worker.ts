/** `glidemq worker <script>`: runs a processor module against a queue until stopped. */
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { DEFAULT_SOCKET_TIMEOUT } from '../../engine/connecting/connection.js';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { ConnectionError, invalid } from '../../engine/shared/errors.js';
import type { Job } from '../../engine/jobs/job.js';
import { Queue } from '../../engine/queue/queue.js';
import { Worker, type WorkerOptions } from '../../engine/consuming/worker.js';
import { action, type CommandContext, warnUnknownQueue } from '../context.js';
import { loadProcessor } from '../load-processor.js';
import { broadcastWorkerOptions, runBroadcastWorker, type BroadcastFlags } from '../broadcast-worker-run.js';
import { runUntilStopped, type IdleState, type RunLimits } from '../worker-lifecycle.js';
import { confirmFromFlags, CONFIRM_FLAG, CONFIRM_TIMEOUT_FLAG, type ConfirmFlags } from '../confirm-flag.js';
import { durableBaselineHolds } from '../require-durable.js';
import { workerVoice } from '../worker-voice.js';
import { tellLostClaim } from '../worker-lost-claim.js';

interface WorkerFlags extends BroadcastFlags, ConfirmFlags {
  requireDurable?: boolean;
  queue?: string;
  concurrency: string;
  lockDuration?: string;
  stalledInterval?: string;
  maxStalledCount?: string;
  blockTimeout?: string;
  globalConcurrency?: string;
  maxJobs?: string;
  exitWhenIdle?: boolean;
  failFast?: boolean;
  logJson?: boolean;
  sandbox?: string;
}

/** Where `worker` runs the script: a child process per slot (the default), a worker thread per slot, or this process. */
const SANDBOX_MODES = ['process', 'thread', 'none'] as const;
type SandboxMode = (typeof SANDBOX_MODES)[number];

function sandboxMode(text: string | undefined): SandboxMode {
  if (text === undefined) return 'process';
  if ((SANDBOX_MODES as readonly string[]).includes(text)) return text as SandboxMode;
  throw invalid(`--sandbox must be process, thread or none, got "${text}"`);
}

function workerOptions(ctx: CommandContext, f: WorkerFlags): WorkerOptions {
  return {
    // A worker is a service: it rides out server restarts instead of giving up like one-shot commands.
    connection: { ...ctx.connection, options: { ...ctx.connection.options, maxRetriesPerRequest: null, socketTimeout: DEFAULT_SOCKET_TIMEOUT, retryStrategy: (n: number) => Math.min(n * 200, 2000) } },
    prefix: ctx.prefix,
    concurrency: parseInteger(f.concurrency, '--concurrency', 1, 10_000),
    ...(f.lockDuration ? { lockDuration: positiveDuration(f.lockDuration, '--lock-duration') } : {}),
    ...(f.stalledInterval ? { stalledInterval: positiveDuration(f.stalledInterval, '--stalled-interval') } : {}),
    ...(f.maxStalledCount ? { maxStalledCount: parseInteger(f.maxStalledCount, '--max-stalled-count', 0, 1_000_000) } : {}),
    ...(f.blockTimeout ? { blockTimeout: positiveDuration(f.blockTimeout, '--block-timeout') } : {}),
    ...(f.globalConcurrency ? { globalConcurrency: parseInteger(f.globalConcurrency, '--global-concurrency', 1, 1_000_000) } : {}),
    ...(f.confirm !== undefined || f.confirmTimeout !== undefined ? { confirm: confirmFromFlags(f) } : {}),
  };
}

function positiveDuration(text: string, what: string): number {
  const ms = parseDuration(text, what);
  if (ms <= 0) throw invalid(`${what} must be greater than 0`);
  return ms;
}

export function register(program: Command): void {
  program
    .command('worker <script>')
    .description('run a processor module against a queue until stopped')
    .option('-q, --queue <name>', 'queue to process (required)')
    .option('-c, --concurrency <n>', 'jobs run at once by this worker', '1')
    .option('--lock-duration <d>', 'a claim idle this long counts as stalled (default: 30s)')
    .option('--stalled-interval <d>', 'how often stalled recovery runs (default: 30s)')
    .option('--max-stalled-count <n>', 'stalls allowed before a job fails (default: 1)')
    .option('--block-timeout <d>', 'how long one blocking read waits (default: 5s)')
    .option('--global-concurrency <n>', 'limit on active jobs across all workers of the queue')
    .option('--max-jobs <n>', 'exit 0 after this many jobs finished')
    .option('--exit-when-idle', 'exit 0 once nothing is waiting, delayed or active')
    .option('--fail-fast', 'stop at the first job that fails for good, and exit 1')
    .option('--sandbox <mode>', 'where the script runs: process (a child process per slot), thread (a worker thread per slot) or none (in this process) (default: process)')
    .option('--log-json', 'what the worker says on stderr (start, stop, connection, pause, exit) as one JSON object per line')
    .option(...CONFIRM_FLAG)
    .option(...CONFIRM_TIMEOUT_FLAG)
    .option('--require-durable', 'refuse to start (exit 1, the failing checks named) when glidemq audit finds the server below the durable baseline')
    .option('--broadcast <name>', 'process a broadcast subscription instead of a queue (with --subscription)')
    .option('--subscription <name>', 'the subscription (consumer group) of --broadcast this worker serves')
    .option('--subjects <filters>', 'with --broadcast: comma-separated subject filters (* one token, > the rest)')
    .option('--attempts <n>', 'with --broadcast: attempts per message (default: 1)')
    .option('--backoff <spec>', 'with --broadcast: delay between attempts, fixed:<ms> or exponential:<ms>')
    .option('--start-from <where>', 'with --broadcast: where a new subscription starts, latest or earliest (default: latest)')
    .addHelpText(
      'after',
      `
The module's default export (ESM) or module.exports (CommonJS) is async (job) => result; the
result is stored as the job's return value, a throw fails the attempt (retried while attempts
remain). SIGINT/SIGTERM stop taking jobs and let running ones finish; a second signal exits at once.

The script runs sandboxed: in a child process per slot (--concurrency of them at most), so a
script that crashes, exits, loops or runs out of memory fails its job, never the worker.
--sandbox thread uses worker threads instead, --sandbox none runs it in the worker's own process.

stdout has one line per finished job (--json: one object per line). stderr says what the worker
does: its start (queue, server, concurrency, version), a stop a signal asked for, a connection
lost and restored, the queue paused and resumed, the delayed jobs --exit-when-idle waits for, and
why it exited. --log-json writes those as {ts, level, event, message, ...} lines for services.

Examples:
  $ glidemq worker ./send-email.js --queue emails --concurrency 10
  $ glidemq worker ./resize.mjs -q images --exit-when-idle --json
  $ glidemq worker ./job.js -q nightly --max-jobs 100 --fail-fast
  $ glidemq worker ./send-email.js -q emails --log-json 2>>/var/log/emails-worker.ndjson
  $ glidemq worker ./resize.mjs -q images --sandbox thread --concurrency 4
  $ glidemq worker ./fast.js -q pings --sandbox none
  $ glidemq worker ./audit.js --broadcast orders --subscription audit --subjects 'orders.*,refunds.>'`,
    )
    .action(
      action(async (ctx, script: string, flags: WorkerFlags) => {
        const broadcast = flags.broadcast !== undefined || flags.subscription !== undefined;
        if (broadcast && flags.queue) throw invalid('give either --queue or --broadcast with --subscription, not both');
        if (!broadcast && !flags.queue) throw invalid('--queue <name> is required (or --broadcast <name> --subscription <name>)');
        const only = (['subjects', 'attempts', 'backoff', 'startFrom'] as const).find((k) => !broadcast && flags[k] !== undefined);
        if (only) throw invalid(`--${only.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies only with --broadcast`);
        if (broadcast && flags.sandbox !== undefined && flags.sandbox !== 'none') {
          throw invalid('--sandbox applies only with --queue: a broadcast worker runs its script in its own process');
        }
        const mode = sandboxMode(flags.sandbox);
        const opts = workerOptions(ctx, flags);
        if (flags.requireDurable && !(await durableBaselineHolds(ctx.connection))) return 1;
        const maxJobs = flags.maxJobs === undefined ? undefined : parseInteger(flags.maxJobs, '--max-jobs', 1);
        const limits = { maxJobs, exitWhenIdle: !!flags.exitWhenIdle, failFast: !!flags.failFast };
        const logJson = !!flags.logJson;
        if (broadcast) {
          const bopts = broadcastWorkerOptions(opts, flags);
          return runBroadcastWorker(ctx, await loadProcessor(script), flags, bopts, limits, logJson);
        }
        const processor = mode === 'none' ? await loadProcessor(script) : processorFile(script);
        const worker = await queueWorker(flags.queue as string, processor, { ...opts, useWorkerThreads: mode === 'thread' });
        await warnIfNeverUsed(ctx, flags.queue as string, logJson);
        return runWorker(ctx, flags.queue as string, worker, opts, limits, logJson);
      }),
    );
}

/**
 * `worker -q typo` would wait forever for jobs nobody adds: say so when the queue was never used.
 * Asked over a one-shot connection: a server that cannot be reached now is the worker's to ride
 * out (it retries), and only a refusal that no retry cures (a database the server does not have)
 * stops the command here.
 */
async function warnIfNeverUsed(ctx: CommandContext, queueName: string, logJson: boolean): Promise<void> {
  const q = new Queue(queueName, { connection: ctx.connection, prefix: ctx.prefix });
  const check = q.exists().then(
    (exists) => {
      if (exists) return;
      if (!logJson) return warnUnknownQueue(ctx, queueName);
      const message = `queue "${queueName}" does not exist under prefix "${ctx.prefix}" at ${ctx.where}: no job, worker or setting ever used it`;
      workerVoice(true).say('warn', 'queue-unknown', message, { queue: queueName, prefix: ctx.prefix });
    },
    (err: unknown) => {
      if (err instanceof ConnectionError && err.code === 'ERR_DATABASE') throw err;
    },
  );
  let timer: NodeJS.Timeout | undefined;
  // a server slow to answer does not hold the worker's start: the check is only a courtesy
  const patience = new Promise<void>((resolve) => (timer = setTimeout(resolve, WARN_CHECK_MS)));
  try {
    await Promise.race([check, patience]);
  } finally {
    clearTimeout(timer);
    void check.catch(() => undefined).finally(() => q.close());
  }
}

/** The script a sandbox runs: it must exist (that it loads, its first child says: see runWorker). */
function processorFile(script: string): string {
  const path = resolve(process.cwd(), script);
  if (!existsSync(path) || !statSync(path).isFile()) throw invalid(`processor script ${path} does not exist`);
  return path;
}

/** How long `worker` waits for the check that the queue was ever used. */
const WARN_CHECK_MS = 1500;

/**
 * The worker, not started. A sandboxed script is loaded by its first child here: one that cannot be
 * loaded, or exports no function, is refused as an in-process one is (loadProcessor).
 */
async function queueWorker(queueName: string, processor: Awaited<ReturnType<typeof loadProcessor>> | string, opts: WorkerOptions): Promise<Worker> {
  const worker = new Worker(queueName, processor, { ...opts, autorun: false });
  try {
    await worker.sandbox?.warm();
  } catch (err) {
    await worker.close(true);
    throw invalid(`processor script ${(err as Error).message}`);
  }
  return worker;
}

function runWorker(
  ctx: CommandContext,
  queueName: string,
  worker: Worker,
  opts: WorkerOptions,
  limits: RunLimits,
  logJson: boolean,
): Promise<number> {
  worker.on('lockLost', (id: string) => void tellLostClaim(queueName, { connection: opts.connection, prefix: opts.prefix }, id, workerVoice(logJson)));
  return runUntilStopped(worker, {
    json: ctx.json,
    logJson,
    about: { label: `queue ${queueName}`, queue: queueName, fields: { queue: queueName }, server: ctx.where, concurrency: worker.settings.concurrency },
    limits,
    describe: (job: Job) => ({
      id: job.id, label: job.name, fields: { name: job.name }, attemptsMade: job.attemptsMade, failedReason: job.failedReason,
      durationMs: Math.max(0, (job.finishedOn ?? 0) - (job.processedOn ?? 0)), willRetry: job.state !== 'failed',
    }),
    idleCheck: () => {
      const q = new Queue(queueName, { connection: opts.connection, prefix: opts.prefix });
      const check = async (): Promise<IdleState> => {
        const c = await q.getJobCounts();
        const others = c.waiting + c.paused + c.active + c.prioritized; // a paused queue's jobs count under paused
        if (others + c.delayed === 0) return { idle: true };
        if (others > 0) return { idle: false };
        // only delayed jobs keep it: say how many and when the first is due
        const next = await q.getNextDelayed();
        return { idle: false, delayed: { count: c.delayed, nextDueInMs: next?.dueInMs } };
      };
      return { check, release: () => q.close() };
    },
  });
}
