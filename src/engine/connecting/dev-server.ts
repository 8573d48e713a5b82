/**
 * `glidemq dev`: a local valkey-server with the durable baseline from DURABILITY.md (AOF,
 * fsync every second, RDB preamble, never evict), on loopback only, with its config, data, pid
 * file and log in `./.glidemq/`. Knows whether the server started from a directory is still the
 * process its pid file names, so `stop` never signals an unrelated process.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { ConnectionError, GlideMQError } from '../shared/errors.js';

export const DEV_DIR = '.glidemq';
export const DEFAULT_DEV_PORT = 6379;

export interface DevPaths {
  dir: string;
  config: string;
  pidFile: string;
  log: string;
}

export interface DevServerInfo {
  url: string;
  pid: number;
  dir: string;
  port: number;
}

export interface ServerBinary {
  path: string;
  /** valkey-server was not on PATH and redis-server stands in. */
  fallback: boolean;
}

export class DevServerError extends GlideMQError {
  constructor(message: string) {
    super('ERR_DEV_SERVER', message, true);
  }
}

export function devPaths(cwd = process.cwd()): DevPaths {
  const dir = resolve(cwd, DEV_DIR);
  return { dir, config: join(dir, 'valkey.conf'), pidFile: join(dir, 'valkey.pid'), log: join(dir, 'valkey.log') };
}

export function findServerBinary(): ServerBinary {
  for (const [name, fallback] of [['valkey-server', false], ['redis-server', true]] as const) {
    const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (found.status === 0 && found.stdout.trim()) return { path: found.stdout.trim(), fallback };
  }
  throw new DevServerError('no valkey-server (or redis-server) on PATH: install Valkey 8, e.g. `make valkey`');
}

/** Config values with spaces or quotes must be quoted for the server's parser. */
function quote(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

export function devConfig(port: number, paths: DevPaths): string {
  return [
    '# Written by `glidemq dev` on every start: the durable baseline, reachable from this host only.',
    `port ${port}`,
    'bind 127.0.0.1',
    'protected-mode yes',
    'daemonize no',
    `dir ${quote(paths.dir)}`,
    `pidfile ${quote(paths.pidFile)}`,
    `logfile ${quote(paths.log)}`,
    'appendonly yes',
    'appendfsync everysec',
    'aof-use-rdb-preamble yes',
    'maxmemory-policy noeviction',
    '# AOF carries durability; a local server needs no snapshot schedule on top.',
    'save ""',
    '',
  ].join('\n');
}

function portFromConfig(paths: DevPaths): number | undefined {
  if (!existsSync(paths.config)) return undefined;
  const m = /^port\s+(\d+)\s*$/m.exec(readFileSync(paths.config, 'utf8'));
  return m ? Number(m[1]) : undefined;
}

function pidFromFile(paths: DevPaths): number | undefined {
  if (!existsSync(paths.pidFile)) return undefined;
  const pid = Number(readFileSync(paths.pidFile, 'utf8').trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Alive and not a zombie waiting to be reaped (containers often lack a reaping init). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no /proc (macOS): kill(0) is the answer
  }
}

function probeClient(port: number): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  client.on('error', () => undefined);
  return client;
}

/** What the server on the port says about itself: its pid and config file, if it answers. */
async function serverIdentity(port: number): Promise<{ pid: number; configFile: string } | undefined> {
  const client = probeClient(port);
  try {
    await client.connect();
    const info = String(await client.call('INFO', 'server'));
    const pid = /^process_id:(\d+)/m.exec(info)?.[1];
    const configFile = /^config_file:(.*)$/m.exec(info)?.[1]?.trim();
    return pid ? { pid: Number(pid), configFile: configFile ?? '' } : undefined;
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

/** The process command line, for a server that does not answer (stopping, loading, hung). */
function commandLine(pid: number): string {
  const ps = spawnSync('ps', ['-o', 'args=', '-p', String(pid)], { encoding: 'utf8' });
  return ps.status === 0 ? ps.stdout.trim() : '';
}

/** The pid is the server this directory started: it says so itself, or its command line does. */
async function isOurServer(pid: number, port: number, paths: DevPaths): Promise<boolean> {
  if (!isAlive(pid)) return false;
  const identity = await serverIdentity(port);
  if (identity) return identity.pid === pid && resolve(identity.configFile) === paths.config;
  const args = commandLine(pid);
  return /\b(valkey|redis)-server\b/.test(args) && args.includes(`:${port}`);
}

const urlFor = (port: number) => `redis://127.0.0.1:${port}`;

/** The dev server started from this directory, if it is still running. */
export async function runningDevServer(cwd = process.cwd()): Promise<DevServerInfo | undefined> {
  const paths = devPaths(cwd);
  const pid = pidFromFile(paths);
  const port = portFromConfig(paths);
  if (pid === undefined || port === undefined) return undefined;
  if (!(await isOurServer(pid, port, paths))) return undefined;
  return { url: urlFor(port), pid, dir: paths.dir, port };
}

async function answersPing(port: number): Promise<boolean> {
  const client = probeClient(port);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG'; // LOADING while the AOF replays: not yet
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** Why a start failed, from the server's log: a taken port, else its last warning. */
function startFailure(paths: DevPaths, port: number): string {
  if (!existsSync(paths.log)) return 'the server exited during start';
  const recent = readFileSync(paths.log, 'utf8').trim().split('\n').slice(-20);
  if (recent.some((l) => /already in use/i.test(l))) return `port ${port} is already in use; choose another with --port`;
  const warning = [...recent].reverse().find((l) => / # /.test(l));
  const reason = warning?.replace(/^.*? # /, '').trim();
  return `the server exited during start${reason ? `: ${reason}` : ''} (log: ${paths.log})`;
}

async function waitUntilServing(child: ChildProcess, port: number, paths: DevPaths, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  while (Date.now() < deadline) {
    if (exited || child.exitCode !== null) {
      throw new DevServerError(startFailure(paths, port));
    }
    // Someone else's server may already answer on the port; only our own child counts.
    if (child.pid !== undefined && (await answersPing(port)) && (await serverIdentity(port))?.pid === child.pid) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new ConnectionError('ERR_CONNECTION', `the server on 127.0.0.1:${port} did not answer PING within ${deadlineMs} ms (log: ${paths.log})`);
}

export interface StartOptions {
  cwd?: string;
  port?: number;
  /** Keep running after this process exits. */
  detach?: boolean;
  binary?: ServerBinary;
  startTimeoutMs?: number;
}

export interface Started {
  info: DevServerInfo;
  binary?: ServerBinary;
  /** A server from this directory was already running; nothing was started. */
  alreadyRunning: boolean;
  /** The server process, when this call started it. */
  child?: ChildProcess;
}

export async function startDevServer(opts: StartOptions = {}): Promise<Started> {
  const cwd = opts.cwd ?? process.cwd();
  const running = await runningDevServer(cwd);
  if (running) return { info: running, alreadyRunning: true };
  const port = opts.port ?? DEFAULT_DEV_PORT;
  const binary = opts.binary ?? findServerBinary();
  const paths = devPaths(cwd);
  mkdirSync(paths.dir, { recursive: true });
  rmSync(paths.pidFile, { force: true }); // stale: its process is gone or is not ours
  writeFileSync(paths.config, devConfig(port, paths));
  // Its own process group: a Ctrl-C reaches only glidemq, which then asks for a clean shutdown.
  const child = spawn(binary.path, [paths.config], { cwd: paths.dir, detached: true, stdio: 'ignore' });
  await new Promise<void>((ok, fail) => {
    child.once('spawn', ok);
    child.once('error', (err) => fail(new DevServerError(`cannot start ${binary.path}: ${err.message}`)));
  });
  try {
    await waitUntilServing(child, port, paths, opts.startTimeoutMs ?? 15000);
  } catch (err) {
    if (child.exitCode === null) child.kill('SIGKILL');
    throw err;
  }
  if (opts.detach) child.unref();
  return { info: { url: urlFor(port), pid: child.pid!, dir: paths.dir, port }, binary, alreadyRunning: false, child };
}

export interface Stopped {
  /** The server that was stopped; undefined when none was running. */
  stopped?: DevServerInfo;
  /** A pid file was left behind by a process that is gone or is not this server. */
  stalePid?: number;
}

async function waitForExit(pid: number, deadlineMs: number): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !isAlive(pid);
}

/** SIGTERM (a clean shutdown that flushes the AOF) to the server started from this directory. */
export async function stopDevServer(cwd = process.cwd(), timeoutMs = 15000): Promise<Stopped> {
  const paths = devPaths(cwd);
  const running = await runningDevServer(cwd);
  if (!running) {
    const pid = pidFromFile(paths);
    if (pid !== undefined) rmSync(paths.pidFile, { force: true });
    return { stalePid: pid };
  }
  process.kill(running.pid, 'SIGTERM');
  if (!(await waitForExit(running.pid, timeoutMs))) {
    throw new DevServerError(`the server (pid ${running.pid}) did not stop within ${timeoutMs} ms; see ${paths.log}`);
  }
  return { stopped: running };
}
