/** `glidemq completion bash|zsh|fish`: the shell completion script, generated from the command tree. */
import { Argument, type Command } from 'commander';
import { completionScript, SHELLS, type Shell } from '../completion.js';

export function register(program: Command): void {
  program
    .command('completion')
    .description('print the shell completion script for bash, zsh or fish')
    .addArgument(new Argument('<shell>', 'the shell to complete in').choices(SHELLS))
    .addHelpText(
      'after',
      `
The script completes command names, sub-commands and flags (the global ones too); load it once
per shell, or from the shell's start-up file.

Examples:
  $ source <(glidemq completion bash)     also in ~/.bashrc
  $ source <(glidemq completion zsh)      also in ~/.zshrc, after compinit
  $ glidemq completion fish > ~/.config/fish/completions/glidemq.fish`,
    )
    .action((shell: Shell, _flags: unknown, cmd: Command) => {
      let root = cmd;
      while (root.parent) root = root.parent;
      process.stdout.write(completionScript(root, shell));
    });
}
