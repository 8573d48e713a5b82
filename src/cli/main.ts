/** Entry point of the `glidemq` command: global options, one registration per command file. */
import { Command, CommanderError, Option } from 'commander';
import { LIBRARY_PACKAGE_VERSION } from '../engine/connecting/library.js';
import { printError } from './output.js';
import { DEFAULT_PREFIX } from './context.js';
import { configureHelpStyle } from './help-style.js';
import { exitQuietlyOnClosedPipe } from './pipe.js';
import { COMMANDS } from './commands/index.js';

export { useModuleImporter } from './load-processor.js';

/**
 * The program with every command (`--help`, the completion script), or with only the commands of
 * the module that registers the command `only` (main.ts, when the arguments name one).
 */
export async function buildProgram(only?: string): Promise<Command> {
  const program = new Command('glidemq');
  configureHelpStyle(program); // before the commands are added: they inherit it
  program
    .description('A durable job queue on Valkey: enqueue, run workers, inspect and heal queues, audit durability.')
    .version(LIBRARY_PACKAGE_VERSION, '-V, --version', 'print the version of glidemq')
    .addOption(
      new Option('-u, --url <url>', 'server URL: redis://, rediss://, valkey:// or valkeys:// (with /<db> for a database), or redis+sentinel:// naming the sentinels, then /<master>').default(
        undefined,
        '$GLIDEMQ_URL, else redis://127.0.0.1:6379',
      ),
    )
    .option('--cluster', 'the URL names a seed node of a Valkey cluster')
    .option('--no-cluster', "not a cluster, whatever the profile says")
    .addOption(new Option('--tls-ca <file>', "PEM file of the CA that signed a rediss:// server's certificate").default(undefined, '$GLIDEMQ_TLS_CA'))
    .addOption(new Option('--prefix <p>', 'key prefix (keys are <prefix>:{<queue>}:...)').default(undefined, `$GLIDEMQ_PREFIX, else ${DEFAULT_PREFIX}`))
    .addOption(
      new Option('--profile <name>', 'named connection settings (url, cluster, prefix, tlsCa) from the profile file').default(
        undefined,
        '$GLIDEMQ_PROFILE, else the profile "default" if there is one',
      ),
    )
    .option('--utc', 'times in UTC (ISO 8601) instead of local time with the zone')
    .option('--json', 'machine-readable output on stdout')
    .exitOverride()
    // A usage error is one line (CLI.md): the hint to --help goes on the same line.
    .configureOutput({ outputError: (str) => printError(`${str.replace(/^error: /, '').trim()} (run with --help for usage and examples)`) });
  program.addHelpText(
    'after',
    `
Examples:
  $ glidemq dev --detach                     start a local durable Valkey
  $ glidemq enqueue emails '{"to":"a@b.c"}'   add a job
  $ glidemq worker ./send.js --queue emails  process jobs
  $ glidemq stats emails                     counts per state
  $ glidemq audit                            check the durability settings
  $ glidemq --profile prod queues            the queues of profile "prod"
  $ GLIDEMQ_PASSWORD=... glidemq -u rediss://app@db:6380 --tls-ca ca.pem queues

Connection settings: a flag wins over the profile you name, which wins over the environment
($GLIDEMQ_URL, $GLIDEMQ_TLS_CA, $GLIDEMQ_PREFIX), which wins over the "default" profile, which
wins over the built-in default. Profiles are read from
$GLIDEMQ_CONFIG, else $XDG_CONFIG_HOME/glidemq/config.json, else ~/.config/glidemq/config.json:
  {"profiles": {"prod": {"url": "rediss://db:6380", "tlsCa": "ca.pem"}}}`,
  );
  const modules = only === undefined ? COMMANDS : COMMANDS.filter((m) => m.names.includes(only));
  for (const { register } of await Promise.all(modules.map((m) => m.load()))) register(program);
  for (const cmd of program.commands) cmd.exitOverride();
  return program;
}

/** The global options above that take a value: the word after one is not a command. */
const VALUE_OPTIONS = new Set(['-u', '--url', '--tls-ca', '--prefix', '--profile']);
const FLAG_OPTIONS = new Set(['--cluster', '--no-cluster', '--utc', '--json']);

/**
 * The command the arguments name, when it runs the same with only its own module registered: a
 * start then loads and initializes that module's code only (some 3 ms of a one-job enqueue).
 * Anything else builds the whole program: no command, an option not known here (--help,
 * --version, a typo), `help`, an alias, and `completion`, whose script lists every command.
 */
function commandNamed(args: string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (VALUE_OPTIONS.has(arg)) i++;
    else if (!FLAG_OPTIONS.has(arg) && !/^--(url|tls-ca|prefix|profile)=/.test(arg)) {
      if (arg.startsWith('-') || arg === 'completion') return undefined;
      return COMMANDS.some((m) => m.names.includes(arg)) ? arg : undefined;
    }
  }
  return undefined;
}

export async function main(argv: string[]): Promise<void> {
  exitQuietlyOnClosedPipe();
  const named = commandNamed(argv.slice(2));
  let program = await buildProgram(named);
  // a module that does not register the name it is listed under: the whole program, as before
  if (named !== undefined && !program.commands.some((c) => c.name() === named)) program = await buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end with code 0; every usage error is exit 2 (CLI.md).
      process.exit(err.exitCode === 0 ? 0 : 2);
    }
    printError(err instanceof Error ? err.message : String(err));
    process.exit(2);
  }
}
