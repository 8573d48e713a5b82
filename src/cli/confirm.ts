/**
 * Confirmation for commands that destroy data (drain, clean, obliterate, remove, schedulers
 * remove), all alike: each has --dry-run (never asks, changes nothing), --yes (never asks), on a TTY
 * it asks, and without a TTY it refuses unless --yes (a cron job or a script must say so
 * explicitly). An answer other than yes changes nothing: it says so on stderr and the command
 * exits 1 (DECLINED). Each question says how many jobs (or keys) it is about.
 *
 * The writes that would make a new queue (pause, limit, schedulers add) ask too, unless --create
 * (allowNewQueue).
 */
import { createInterface } from 'node:readline/promises';
import { invalid } from '../engine/shared/errors.js';
import { notice } from './output.js';

/** The exit code of a command whose confirmation was declined. */
export const DECLINED = 1;

/**
 * `what` names the change with its count ("remove 1721 completed jobs of emails"); given as a
 * function it is worked out (a dry run) only when it is asked or refused, never with --yes.
 */
export async function confirmDestructive(what: string | (() => Promise<string>), yes: boolean | undefined): Promise<boolean> {
  if (yes) return true;
  const said = typeof what === 'string' ? what : await what();
  if (!onTerminal()) {
    throw invalid(`refusing to ${said} without --yes (no terminal to confirm on); use --dry-run to see what it would do`);
  }
  return ask(`${said}? This cannot be undone. [y/N] `);
}

function onTerminal(): boolean {
  return !!process.stdin.isTTY && !!process.stderr.isTTY;
}

/** Asks a yes/no question on the terminal; anything but yes says "nothing changed" and is false. */
async function ask(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(question);
    const yes = /^y(es)?$/i.test(answer.trim());
    if (!yes) notice('nothing changed');
    return yes;
  } finally {
    rl.close();
  }
}

/** What a write asks before it makes a queue that does not exist: the queue, and where. */
export interface NewQueue {
  exists(): Promise<boolean>;
  readonly name: string;
}

/**
 * Writes that would make a queue nobody used (`pause`, `limit`, `schedulers add`: most often a
 * typo) go ahead when the queue exists or with --create; else on a terminal they ask, and without
 * one they refuse (a usage error, exit 2: nothing written). False: declined on the terminal.
 */
export async function allowNewQueue(q: NewQueue, where: { prefix: string; where: string }, create: boolean | undefined): Promise<boolean> {
  if (create || (await q.exists())) return true;
  const missing = `queue "${q.name}" does not exist under prefix "${where.prefix}" at ${where.where}`;
  if (!onTerminal()) throw invalid(`${missing}: nothing written (glidemq queues lists the queues; --create makes a new one)`);
  return ask(`${missing}; create it? [y/N] `);
}

/** The --create flag of the writes allowNewQueue guards. */
export const CREATE_FLAG = ['--create', 'make the queue if it does not exist yet (else asked on a terminal, refused without one)'] as const;
