/** `glidemq dev [start|stop|status]`: the local durable server (logic in src/engine/connecting/dev-server.ts). */
import type { ChildProcess } from 'node:child_process';
import { relative } from 'node:path';
import type { Command } from 'commander';
import { parseInteger } from '../../engine/shared/duration.js';
import { findServerBinary, runningDevServer, startDevServer, stopDevServer, type DevServerInfo } from '../../engine/connecting/dev-server.js';
import { invalid } from '../../engine/shared/errors.js';
import { action, type CommandContext } from '../context.js';
import { notice, print, printJson, warn } from '../output.js';

interface DevOptions {
  port?: string;
  detach?: boolean;
}

const shown = (dir: string) => `./${relative(process.cwd(), dir) || '.'}`;
const asJson = (i: DevServerInfo) => ({ url: i.url, pid: i.pid, dir: i.dir });

function report(ctx: CommandContext, info: DevServerInfo, line: string, noteWithJson = false): void {
  if (!ctx.json) return print(line);
  printJson(asJson(info));
  if (noteWithJson) notice(line);
}

/** Foreground: the first signal asks for a clean shutdown, a second one makes the server exit at once. */
function runUntilSignalled(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    let signals = 0;
    const forward = () => {
      signals += 1;
      child.kill(signals === 1 ? 'SIGTERM' : 'SIGINT');
    };
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.once('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      if (signals === 0) warn(`the server exited on its own (${signal ?? `code ${code}`}); see its log in ./.glidemq`);
      resolve(signals > 0 || code === 0 ? 0 : 2);
    });
  });
}

async function start(ctx: CommandContext, opts: DevOptions): Promise<number> {
  const port = opts.port === undefined ? undefined : parseInteger(opts.port, '--port', 1, 65535);
  const binary = findServerBinary();
  if (binary.fallback) warn(`valkey-server is not on PATH; using ${binary.path} instead`);
  const started = await startDevServer({ port, detach: opts.detach, binary });
  const { info } = started;
  if (started.alreadyRunning) {
    const note = port !== undefined && port !== info.port ? ` (not starting another on port ${port})` : '';
    report(ctx, info, `a dev server already runs from ${shown(info.dir)}: ${info.url} (pid ${info.pid})${note}`, true);
    return 0;
  }
  if (opts.detach) {
    report(ctx, info, info.url);
    return 0;
  }
  report(ctx, info, `dev server on ${info.url} (pid ${info.pid}), data and log in ${shown(info.dir)}; Ctrl-C to stop`);
  return runUntilSignalled(started.child!);
}

async function stop(ctx: CommandContext): Promise<number> {
  const { stopped, stalePid } = await stopDevServer();
  if (ctx.json) {
    printJson({ stopped: !!stopped, pid: stopped?.pid ?? null });
  } else if (stopped) {
    print(`stopped the dev server on ${stopped.url} (pid ${stopped.pid})`);
  } else {
    const stale = stalePid !== undefined ? ` (removed a stale pid file naming pid ${stalePid}, which is not this server)` : '';
    print(`no dev server is running from ./.glidemq${stale}`);
  }
  return 0;
}

async function status(ctx: CommandContext): Promise<number> {
  const info = await runningDevServer();
  if (ctx.json) printJson(info ? { running: true, ...asJson(info) } : { running: false });
  else print(info ? `running: ${info.url} (pid ${info.pid}), data in ${shown(info.dir)}` : 'not running');
  return info ? 0 : 1;
}

export function register(program: Command): void {
  program
    .command('dev')
    .description('run a local valkey-server with the durable baseline, data in ./.glidemq/')
    .argument('[action]', 'start, stop or status (default: start)')
    .option('--port <port>', 'port on 127.0.0.1 (default: 6379)')
    .option('--detach', 'return once the server answers PING, leaving it running')
    .addHelpText(
      'after',
      `
The server runs with appendonly yes, appendfsync everysec, aof-use-rdb-preamble yes and
maxmemory-policy noeviction, bound to 127.0.0.1 with protected-mode on, so \`glidemq audit\` passes.
Config, data, pid file and log live in ./.glidemq/ of the current directory.

Examples:
  $ glidemq dev                    run in the foreground; Ctrl-C stops it
  $ glidemq dev --detach           start in the background and print its URL
  $ glidemq dev --detach --port 6390 --json
  $ glidemq dev status             is the one from this directory running? (exit 1 if not)
  $ glidemq dev stop               stop the one started from this directory`,
    )
    .action(
      action(async (ctx, what?: string) => {
        const opts = ctx.globals as unknown as DevOptions;
        switch (what ?? 'start') {
          case 'start':
            return start(ctx, opts);
          case 'stop':
            return stop(ctx);
          case 'status':
            return status(ctx);
          default:
            throw invalid(`unknown dev action "${what}": use start, stop or status`);
        }
      }),
    );
}
