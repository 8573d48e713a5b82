/** `glidemq completion bash|zsh|fish`: the shell completion script, generated from the command tree. */
import { Argument, Option, type Command } from 'commander';
import { acquireClient, closeClient, settleTopology } from '../../engine/connecting/connection.js';
import { listQueues } from '../../engine/connecting/discovery.js';
import { completionScript, SHELLS, type Shell } from '../completion.js';
import { contextFrom, flushAndExit } from '../context.js';

/** How long the scripts' call for queue names may take: a completion that hangs is worse than none. */
const QUEUES_WITHIN_MS = 1500;

export function register(program: Command): void {
  program
    .command('completion')
    .description('print the shell completion script for bash, zsh or fish')
    .addArgument(new Argument('<shell>', 'the shell to complete in').choices(SHELLS))
    // what the scripts call to complete a queue name: the names under the prefix, one a line
    .addOption(new Option('--queues', 'print the queue names under the prefix (the scripts ask for them)').hideHelp())
    .addHelpText(
      'after',
      `
The script completes command names, sub-commands, flags (the global ones too), the values of
--state, and queue names, asked of the server the command line names (-u, --prefix, --profile,
else the environment); without an answer within ${QUEUES_WITHIN_MS / 1000}s it offers none. Load it
once per shell, or from the shell's start-up file.

Examples:
  $ source <(glidemq completion bash)     also in ~/.bashrc
  $ source <(glidemq completion zsh)      also in ~/.zshrc, after compinit
  $ glidemq completion fish > ~/.config/fish/completions/glidemq.fish`,
    )
    .action(async (shell: Shell, flags: { queues?: boolean }, cmd: Command) => {
      if (flags.queues) return printQueueNames(cmd);
      let root = cmd;
      while (root.parent) root = root.parent;
      process.stdout.write(completionScript(root, shell));
    });
}

/** The queue names under the prefix, one a line; nothing at all (exit 0) when they cannot be had. */
async function printQueueNames(cmd: Command): Promise<void> {
  let names: string[] = [];
  try {
    const ctx = contextFrom(cmd);
    const acquired = acquireClient({ ...ctx.connection, options: { ...ctx.connection.options, connectTimeout: QUEUES_WITHIN_MS, retryStrategy: () => null } });
    const listing = (async () => listQueues(await settleTopology(acquired), ctx.prefix))();
    const late = new Promise<string[]>((resolve) => setTimeout(() => resolve([]), QUEUES_WITHIN_MS).unref());
    names = await Promise.race([listing.catch(() => []), late]);
    void closeClient(acquired.client, 200).catch(() => undefined);
  } catch {
    names = [];
  }
  if (names.length) process.stdout.write(`${[...names].sort().join('\n')}\n`);
  await flushAndExit(0);
}
