/** Every command's registration, in the order `--help` lists them. */
import type { Command } from 'commander';

export type Register = (program: Command) => void;

export const COMMANDS: Register[] = [];
