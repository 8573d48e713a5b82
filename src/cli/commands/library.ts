/**
 * `glidemq library status` / `glidemq library install`: the function library on every primary,
 * checked against the one this glidemq ships, and installed by an administrator so that producers,
 * workers and operators need no FUNCTION LOAD (README "ACL roles").
 */
import type { Command } from 'commander';
import { acquireClient, type Client, closeClient, isCluster, settleTopology, waitReady } from '../../engine/connecting/connection.js';
import { LibraryVersionError } from '../../engine/shared/errors.js';
import {
  installLibrary, LIBRARY_CODE_SHA256, LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION, libraryStatus,
  type InstallResult, type LibraryState, type NodeLibrary,
} from '../../engine/connecting/library.js';
import { action, type CommandContext } from '../context.js';
import { colour, print, printJson, table } from '../output.js';

interface InstallFlags {
  force?: boolean;
}

/** What to do about each state, for people reading the status table. */
const ADVICE: Record<LibraryState, string> = {
  current: 'this glidemq\'s library',
  missing: 'not installed: run `glidemq library install` as an administrator',
  older: 'an older build: `glidemq library install` (or any client allowed to FUNCTION LOAD) replaces it',
  newer: 'from a newer glidemq: upgrade this glidemq; clients of this version refuse it',
  swapped: 'reports this version with other code: someone replaced it; clients refuse it. Reinstall, and check who may FUNCTION LOAD (glidemq audit)',
  foreign: 'declares no glidemq version: clients refuse it. Reinstall, and check who may FUNCTION LOAD (glidemq audit)',
};

async function withClient<T>(ctx: CommandContext, body: (client: Client) => Promise<T>): Promise<T> {
  const acquired = acquireClient(ctx.connection);
  try {
    const client = await settleTopology(acquired); // a plain URL naming a cluster node reaches every primary
    await waitReady(client, ctx.where, isCluster(client) ? 15_000 : 5_000);
    return await body(client);
  } finally {
    await closeClient(acquired.client);
  }
}

const ours = { version: LIBRARY_VERSION, package: LIBRARY_PACKAGE_VERSION, codeSha256: LIBRARY_CODE_SHA256 };
const label = (n: NodeLibrary) => (n.version ? `${n.version} (glidemq ${n.package})` : '-');
const thisGlidemq = () => colour.dim(`this glidemq: library ${LIBRARY_VERSION} (glidemq ${LIBRARY_PACKAGE_VERSION})`);

function nodeJson(n: NodeLibrary) {
  return { address: n.address, state: n.state, version: n.version ?? null, package: n.package ?? null, codeSha256: n.codeSha256 ?? null, codeMatches: n.state === 'current' };
}

function registerStatus(cmd: Command): void {
  cmd
    .command('status', { isDefault: true })
    .description('per primary: the library it holds, and whether its code is exactly this glidemq\'s')
    .addHelpText(
      'after',
      `
Reads each primary's library code (FUNCTION LIST WITHCODE, which needs function|list) and compares it
with this glidemq's; nothing of the node's library runs. States: current, missing, older, newer,
swapped (this version's name with other code) and foreign (no glidemq version at all).
Exit codes: 0 every primary holds this glidemq's library, 1 one does not, 2 could not check.

Examples:
  $ glidemq library status
  $ glidemq library status --cluster -u redis://10.0.0.5:7000
  $ glidemq library status --json | jq '.nodes[] | select(.codeMatches | not)'`,
    )
    .action(
      action(async (ctx) => {
        const nodes = await withClient(ctx, (c) => libraryStatus(c));
        const code = nodes.every((n) => n.state === 'current') ? 0 : 1;
        if (ctx.json) {
          printJson({ library: ours, nodes: nodes.map(nodeJson) });
          return code;
        }
        print(
          table({
            head: ['node', 'state', 'library', 'code matches', 'advice'],
            rows: nodes.map((n) => [n.address, stateColour(n.state), label(n), n.state === 'current' ? 'yes' : 'no', ADVICE[n.state]]),
            wrap: 4,
          }),
        );
        print(thisGlidemq());
        return code;
      }),
    );
}

function registerInstall(cmd: Command): void {
  cmd
    .command('install')
    .description('load this glidemq\'s library on every primary (idempotent; for an administrator)')
    .option('--force', 'also replace a library from a newer glidemq (a deliberate downgrade)')
    .addHelpText(
      'after',
      `
Run as a user allowed to FUNCTION LOAD (the default user, or the administrator role in README
"ACL roles") after each deploy of a new glidemq, and after FUNCTION FLUSH or a new empty primary.
A node that already holds this library is left alone; a missing, older, swapped or foreign library
is replaced, and each node is read back. Producers, workers and operators then need no FUNCTION LOAD.
Exit codes: 0 every primary holds this library, 2 a node was refused or could not be reached.

Examples:
  $ glidemq library install -u redis://admin@db:6379        password in $GLIDEMQ_PASSWORD
  $ glidemq library install --cluster -u redis://10.0.0.5:7000
  $ glidemq library install --json`,
    )
    .action(
      action(async (ctx, flags: InstallFlags) => {
        const results = await withClient(ctx, (c) => installLibrary(c, { force: !!flags.force }));
        if (ctx.json) {
          printJson({
            library: ours,
            nodes: results.map((r) => ({ ...nodeJson(r), before: r.before, action: r.action, ...(r.error ? { error: r.error } : {}) })),
          });
        } else {
          for (const r of results.filter((x) => !x.error)) print(`${r.address}: ${describeInstall(r)}`);
        }
        const failed = results.find((r) => r.error);
        if (failed) throw new LibraryVersionError(failed.action === 'refused' ? 'ERR_LIBRARY_NEWER' : 'ERR_LIBRARY_INSTALL', failed.error!);
        return 0;
      }),
    );
}

function describeInstall(r: InstallResult): string {
  if (r.action === 'unchanged') return colour.dim(`already holds library ${LIBRARY_VERSION} (glidemq ${LIBRARY_PACKAGE_VERSION})`);
  const was = r.before === 'missing' ? 'none' : r.before;
  return `${r.action === 'installed' ? 'installed' : 'replaced'} library ${LIBRARY_VERSION} (glidemq ${LIBRARY_PACKAGE_VERSION}); before: ${was}`;
}

function stateColour(state: LibraryState): string {
  if (state === 'current') return colour.green(state);
  if (state === 'older' || state === 'missing') return colour.yellow(state);
  return colour.red(state);
}

export function register(program: Command): void {
  const cmd = program
    .command('library')
    .description('check or install the glidemq function library on every primary')
    .addHelpText(
      'after',
      `
Examples:
  $ glidemq library                      same as: glidemq library status
  $ glidemq library install -u redis://admin@db:6379`,
    );
  registerStatus(cmd);
  registerInstall(cmd);
}
