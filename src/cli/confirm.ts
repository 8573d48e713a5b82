/**
 * Confirmation for commands that destroy data (drain, clean, obliterate, remove, schedulers
 * remove), all alike: each has --dry-run (never asks, changes nothing), --yes (never asks), on a TTY
 * it asks, and without a TTY it refuses unless --yes (a cron job or a script must say so
 * explicitly). An answer other than yes changes nothing: it says so on stderr and the command
 * exits 1 (DECLINED).
 */
import { createInterface } from 'node:readline/promises';
import { invalid } from '../engine/shared/errors.js';
import { notice } from './output.js';

/** The exit code of a command whose confirmation was declined. */
export const DECLINED = 1;

export async function confirmDestructive(what: string, yes: boolean | undefined): Promise<boolean> {
  if (yes) return true;
  if (!process.stdin.isTTY || !process.stderr.isTTY) {
    throw invalid(`refusing to ${what} without --yes (no terminal to confirm on); use --dry-run to see what it would do`);
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${what}? This cannot be undone. [y/N] `);
    const yes = /^y(es)?$/i.test(answer.trim());
    if (!yes) notice('nothing changed');
    return yes;
  } finally {
    rl.close();
  }
}
