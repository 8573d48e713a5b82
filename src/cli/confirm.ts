/**
 * Confirmation for commands that destroy data: on a TTY ask, without a TTY refuse unless --yes
 * (a cron job or a script must say so explicitly). --dry-run never reaches here.
 */
import { createInterface } from 'node:readline/promises';
import { invalid } from '../engine/errors.js';

export async function confirmDestructive(what: string, yes: boolean | undefined): Promise<boolean> {
  if (yes) return true;
  if (!process.stdin.isTTY || !process.stderr.isTTY) {
    throw invalid(`refusing to ${what} without --yes (no terminal to confirm on); use --dry-run to see what it would do`);
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${what}? This cannot be undone. [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}
