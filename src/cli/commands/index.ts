/**
 * Every command module, in the order `--help` lists them: the commands it registers and where it
 * lives. A module is loaded when it is registered, so that a start which runs one named command
 * (main.ts) loads and initializes that command's modules only. `names` are what the module
 * registers at the top level (test/cli/help.test.ts checks them).
 */
import type { Command } from 'commander';

export type Register = (program: Command) => void;

export interface CommandModule {
  names: string[];
  load: () => Promise<{ register: Register }>;
}

export const COMMANDS: CommandModule[] = [
  { names: ['dev'], load: () => import('./dev.js') },
  { names: ['enqueue'], load: () => import('./enqueue.js') },
  { names: ['worker'], load: () => import('./worker.js') },
  { names: ['stats'], load: () => import('./stats.js') },
  { names: ['job'], load: () => import('./job.js') },
  { names: ['jobs'], load: () => import('./jobs.js') },
  { names: ['flow'], load: () => import('./flow.js') },
  { names: ['retry'], load: () => import('./retry.js') },
  { names: ['promote'], load: () => import('./promote.js') },
  { names: ['cancel'], load: () => import('./cancel.js') },
  { names: ['export'], load: () => import('./export.js') },
  { names: ['import-bullmq'], load: () => import('./import-bullmq.js') },
  { names: ['queues'], load: () => import('./queues.js') },
  { names: ['workers'], load: () => import('./workers.js') },
  { names: ['top'], load: () => import('./top.js') },
  { names: ['pause', 'resume'], load: () => import('./pause.js') },
  { names: ['limit'], load: () => import('./limit.js') },
  { names: ['pel'], load: () => import('./pel.js') },
  { names: ['reclaim'], load: () => import('./reclaim.js') },
  { names: ['heal'], load: () => import('./heal.js') },
  { names: ['drain', 'clean', 'obliterate', 'remove'], load: () => import('./cleanup.js') },
  { names: ['metrics'], load: () => import('./metrics.js') },
  { names: ['events'], load: () => import('./events.js') },
  { names: ['check'], load: () => import('./check.js') },
  { names: ['exporter'], load: () => import('./exporter.js') },
  { names: ['ui'], load: () => import('./ui.js') },
  { names: ['schedulers'], load: () => import('./schedulers.js') },
  { names: ['publish'], load: () => import('./publish.js') },
  { names: ['subscriptions'], load: () => import('./subscriptions.js') },
  { names: ['audit'], load: () => import('./audit.js') },
  { names: ['library'], load: () => import('./library.js') },
  { names: ['completion'], load: () => import('./completion.js') },
];
