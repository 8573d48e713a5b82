/**
 * What every command gets: the global options turned into engine connection settings, and the
 * wrapper that turns a command's outcome (a code, or an error) into an exit code and one line.
 */
import type { Command } from 'commander';
import { DEFAULT_URL, type ClientSettings, lastConnectionProblem, lastDatabaseRefusal, parseUrl, probeForeignServer, redactUrl, redisOptionsFromUrl } from '../engine/connecting/connection.js';
import { ConnectionError, GlideMQError, invalid } from '../engine/shared/errors.js';
import { Queue } from '../engine/queue/queue.js';
import { printError, useUtcTimes, warn } from './output.js';
import { type ChosenProfile, chooseProfile } from './profiles.js';

export interface GlobalOptions {
  url?: string;
  /** undefined: neither --cluster nor --no-cluster (the profile decides). */
  cluster?: boolean;
  tlsCa?: string;
  prefix?: string;
  profile?: string;
  utc?: boolean;
  json?: boolean;
}

export interface CommandContext {
  globals: GlobalOptions;
  connection: ClientSettings;
  prefix: string;
  json: boolean;
  /** The URL with any password hidden, for messages. */
  where: string;
  /** The connection profile in use (profiles.ts), if any. */
  profile?: ChosenProfile;
}

export const DEFAULT_PREFIX = 'glide';

/**
 * The global options resolved into connection settings. Each setting is the first of: its flag,
 * its environment variable ($GLIDEMQ_URL, $GLIDEMQ_TLS_CA, $GLIDEMQ_PREFIX), the connection
 * profile (profiles.ts), the built-in default.
 */
export function contextFrom(cmd: Command): CommandContext {
  const globals = cmd.optsWithGlobals() as GlobalOptions;
  useUtcTimes(!!globals.utc);
  const env = process.env;
  const profile = chooseProfile(globals.profile, env);
  const p = profile?.settings ?? {};
  const inProfile = (what: string) => `${profile!.file}: profile "${profile!.name}": ${what}`;
  // CLI.md: flags override the profile, the profile overrides the environment. A profile nobody
  // named (the file's "default") is itself only a default: the environment overrides it.
  const named = globals.profile !== undefined || !!env.GLIDEMQ_PROFILE;
  const pick = <T>(flag: T | undefined, fromEnv: T | undefined, fromProfile: T | undefined): T | undefined =>
    flag ?? (named ? (fromProfile ?? fromEnv) : (fromEnv ?? fromProfile));

  const envUrl = env.GLIDEMQ_URL || undefined;
  const urlFromProfile = globals.url === undefined && p.url !== undefined && (named || envUrl === undefined);
  const url = pick(globals.url, envUrl, p.url) ?? DEFAULT_URL;
  let parsed;
  try {
    parsed = parseUrl(url); // validates early: a bad URL is a usage error before any connection attempt
  } catch (err) {
    throw urlFromProfile ? invalid(inProfile((err as Error).message)) : err;
  }
  if (globals.tlsCa && !parsed.tls) throw invalid(`--tls-ca is for TLS servers: use a rediss:// or valkeys:// URL, not ${redactUrl(url)}`);
  const envCa = env.GLIDEMQ_TLS_CA || undefined;
  let tlsCa = globals.tlsCa ?? (named && p.tlsCa !== undefined && parsed.tls ? undefined : envCa);
  if (tlsCa === undefined && p.tlsCa !== undefined) {
    if (parsed.tls) tlsCa = p.tlsCa;
    // the profile's own URL without TLS is a mistake in the file; a URL from elsewhere just does not use the CA
    else if (urlFromProfile) throw invalid(inProfile(`tlsCa is for TLS servers: use a rediss:// or valkeys:// URL, not ${redactUrl(url)}`));
  }
  if (parsed.tls && tlsCa) {
    try {
      redisOptionsFromUrl(parsed, undefined, tlsCa); // an unreadable CA file is a usage error too
    } catch (err) {
      throw tlsCa === p.tlsCa && globals.tlsCa === undefined ? invalid(inProfile((err as Error).message)) : err;
    }
  }
  const prefix = pick(globals.prefix, env.GLIDEMQ_PREFIX || undefined, p.prefix) ?? DEFAULT_PREFIX;
  return {
    globals,
    connection: { url, cluster: globals.cluster ?? p.cluster ?? false, password: env.GLIDEMQ_PASSWORD, tlsCa, options: cliClientOptions() },
    prefix,
    json: !!globals.json,
    where: redactUrl(url),
    ...(profile ? { profile } : {}),
  };
}

/**
 * A CLI should fail fast when the server is unreachable instead of retrying forever. A server that
 * accepts the connection but never answers (hung, partitioned) counts as unreachable after
 * socketTimeout without a reply, so a one-shot command gives up within about 5 s.
 */
function cliClientOptions() {
  return {
    connectTimeout: 3000,
    socketTimeout: 2000,
    maxRetriesPerRequest: 1,
    retryStrategy: (times: number) => (times > 3 ? null : Math.min(times * 200, 1000)),
  };
}

export type ActionResult = number | void;

/** Runs a command body; exit 0 on success, its returned code, or 2 with one line on an error. */
export function action<A extends unknown[]>(
  body: (ctx: CommandContext, ...args: A) => Promise<ActionResult>,
): (...args: unknown[]) => Promise<void> {
  return async (...args: unknown[]) => {
    const cmd = args[args.length - 1] as Command;
    let code = 0;
    let where: string | undefined;
    let url: string | undefined;
    try {
      const ctx = contextFrom(cmd);
      where = ctx.where;
      url = ctx.connection.url;
      const positional = args.slice(0, -1) as A; // commander passes (...args, options, command)
      code = (await body(ctx, ...positional)) ?? 0;
    } catch (err) {
      code = 2;
      printError(await namingForeignServer(describeError(err, where), url));
      if (process.env.GLIDEMQ_DEBUG && err instanceof Error) process.stderr.write(`${err.stack}\n`);
    }
    await flushAndExit(code);
  };
}

export function describeError(err: unknown, where = 'the server'): string {
  if (err instanceof ConnectionError) return err.message;
  // A server without the URL's database: the client was closed on purpose (connection.ts), and
  // whatever failed next ("Connection is closed") is not news.
  const refused = lastDatabaseRefusal();
  if (refused) return refused.message;
  if (err instanceof GlideMQError) return err.message;
  if (err instanceof Error) {
    const e = err as Error & { code?: string };
    if (e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' || e.code === 'ETIMEDOUT' || e.code === 'EHOSTUNREACH') {
      return `cannot reach ${where}: ${lastConnectionProblem() ?? e.code}`;
    }
    if (/Connection is closed|Reached the max retries|ECONNREFUSED|connect ETIMEDOUT|Stream isn't writeable/.test(e.message)) {
      const why = lastConnectionProblem();
      if (why?.startsWith('authentication failed')) return `${why} at ${where}`;
      if (why && / is not a Valkey server \(/.test(why)) return why; // it names the host and port
      return `cannot reach ${where}: ${why ?? 'no connection could be made (is the server running, and is the URL right?)'}`;
    }
    if (/^WRONGPASS|invalid password/i.test(e.message)) return `authentication failed at ${where}: wrong user name or password`;
    if (/^NOAUTH/.test(e.message)) return `authentication failed at ${where}: the server wants a password (in the URL or $GLIDEMQ_PASSWORD)`;
    return e.message;
  }
  return String(err);
}

/**
 * A connection cut at once (EPIPE, ECONNRESET) is what a web server does to a client that speaks
 * no HTTP, often before its answer can be read: the address is asked once more, and an HTTP answer
 * is named as such.
 */
async function namingForeignServer(message: string, url: string | undefined): Promise<string> {
  if (!url || !/\b(EPIPE|ECONNRESET)\b/.test(message)) return message;
  try {
    const parsed = parseUrl(url);
    if (parsed.sentinel || parsed.tls) return message;
    return (await probeForeignServer(parsed.host, parsed.port)) ?? message;
  } catch {
    return message;
  }
}

export async function flushAndExit(code: number): Promise<never> {
  await new Promise<void>((r) => process.stdout.write('', () => r()));
  process.exit(code);
}

/** Opens the engine's Queue for a command; callers close it. */
export function openQueue(ctx: CommandContext, name: string): Queue {
  return new Queue(name, { connection: ctx.connection, prefix: ctx.prefix });
}

export interface WithQueueOptions {
  /** The command adds to the queue (enqueue): a new queue is what it is for, nothing to warn about. */
  creates?: boolean;
}

/**
 * Runs `body` with an open queue and always closes it. A queue that was never used is most often a
 * typo: a warning on stderr names it (the command still runs: a read finds nothing and writes
 * nothing, a write such as pause makes the queue).
 */
export async function withQueue<T>(ctx: CommandContext, name: string, body: (q: Queue) => Promise<T>, opts: WithQueueOptions = {}): Promise<T> {
  const q = openQueue(ctx, name);
  try {
    await q.waitUntilReady();
    if (!opts.creates && !(await q.exists())) warnUnknownQueue(ctx, name);
    return await body(q);
  } finally {
    await q.close();
  }
}

/** The warning for a queue nothing ever used (a typo, usually). */
export function warnUnknownQueue(ctx: CommandContext, name: string): void {
  warn(`queue "${name}" does not exist under prefix "${ctx.prefix}" at ${ctx.where}: no job, worker or setting ever used it (glidemq queues lists the queues)`);
}
