/** Every command's registration, in the order `--help` lists them. */
import type { Command } from 'commander';
import { register as dev } from './dev.js';
import { register as enqueue } from './enqueue.js';
import { register as worker } from './worker.js';
import { register as stats } from './stats.js';
import { register as job } from './job.js';
import { register as jobs } from './jobs.js';
import { register as flow } from './flow.js';
import { register as retry } from './retry.js';
import { register as promote } from './promote.js';
import { register as exportJobs } from './export.js';
import { register as queues } from './queues.js';
import { register as top } from './top.js';
import { register as pause } from './pause.js';
import { register as pel } from './pel.js';
import { register as reclaim } from './reclaim.js';
import { register as heal } from './heal.js';
import { register as cleanup } from './cleanup.js';
import { register as metrics } from './metrics.js';
import { register as schedulers } from './schedulers.js';
import { register as publish } from './publish.js';
import { register as subscriptions } from './subscriptions.js';
import { register as audit } from './audit.js';
import { register as library } from './library.js';
import { register as limit } from './limit.js';
import { register as completion } from './completion.js';
import { register as events } from './events.js';
import { register as check } from './check.js';
import { register as exporter } from './exporter.js';
import { register as workers } from './workers.js';
import { register as cancel } from './cancel.js';
import { register as importBullmq } from './import-bullmq.js';
import { register as ui } from './ui.js';

export type Register = (program: Command) => void;

export const COMMANDS: Register[] = [dev, enqueue, worker, stats, job, jobs, flow, retry, promote, cancel, exportJobs, importBullmq, queues, workers, top, pause, limit, pel, reclaim, heal, cleanup, metrics, events, check, exporter, ui, schedulers, publish, subscriptions, audit, library, completion];
