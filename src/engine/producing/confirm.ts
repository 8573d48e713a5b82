/**
 * Confirmed writes (README "Confirmed writes"): a write whose reply comes only once the server says
 * it is fsynced (WAITAOF on the primary) and/or held by n replicas (WAIT, or WAITAOF on n replicas
 * when fsync is also asked). The confirmation goes on the very connection the write went through,
 * right behind it (pipelined on a standalone client: no extra round trip), because WAIT and WAITAOF
 * judge that connection's own last write. On a cluster, that is the connection to the primary that
 * holds the slot. A confirmation that does not hold within the timeout rejects with
 * ConfirmTimeoutError, saying what was reached; the write itself was made once and stays made.
 */
import type { Redis } from 'ioredis';
import { ConfirmTimeoutError, invalid, NotSupportedError } from '../shared/errors.js';
import { callFunction } from '../connecting/library.js';
import { connectionFor, hostLabel } from '../connecting/cluster-nodes.js';
import { isCluster, type Client } from '../connecting/client-shape.js';

export interface ConfirmOptions {
  /** WAITAOF: the write is in the primary's fsynced append-only file (and the replicas' with `replicas`). */
  fsync?: boolean;
  /** WAIT for this many replicas to hold the write (WAITAOF on them with `fsync`). */
  replicas?: number;
  /** How long to wait for the confirmation, ms (default 5000). */
  timeout?: number;
}

/** A confirm option checked: what to ask and how long. */
export interface Confirm {
  readonly fsync: boolean;
  readonly replicas: number;
  readonly timeout: number;
}

export const DEFAULT_CONFIRM_TIMEOUT_MS = 5000;
const MAX_CONFIRM_TIMEOUT_MS = 3_600_000;
const MAX_REPLICAS = 64;

/** The confirm option checked (undefined or false: none); `where` names it in a refusal. */
export function checkConfirm(v: unknown, where = 'confirm'): Confirm | undefined {
  if (v === undefined || v === false) return undefined;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw invalid(`${where} must be an object { fsync?: boolean, replicas?: number, timeout?: ms }, got ${String(v)}`);
  }
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== 'fsync' && k !== 'replicas' && k !== 'timeout') throw invalid(`${where}.${k} is not a confirm option (fsync, replicas, timeout)`);
  }
  if (o.fsync !== undefined && typeof o.fsync !== 'boolean') throw invalid(`${where}.fsync must be true or false, got ${String(o.fsync)}`);
  const replicas = o.replicas ?? 0;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0 || replicas > MAX_REPLICAS) {
    throw invalid(`${where}.replicas must be a whole number from 0 to ${MAX_REPLICAS}, got ${String(o.replicas)}`);
  }
  const timeout = o.timeout ?? DEFAULT_CONFIRM_TIMEOUT_MS;
  if (typeof timeout !== 'number' || !Number.isInteger(timeout) || timeout < 1 || timeout > MAX_CONFIRM_TIMEOUT_MS) {
    throw invalid(`${where}.timeout must be a whole number of ms from 1 to ${MAX_CONFIRM_TIMEOUT_MS}, got ${String(o.timeout)}`);
  }
  const fsync = o.fsync === true;
  if (!fsync && replicas === 0) throw invalid(`${where} asks for nothing: set fsync: true and/or replicas: n (1 or more)`);
  return { fsync, replicas, timeout };
}

/** The per-call confirm when given (even `false`: none), else the one the object was made with. */
export function pickConfirm(perCall: unknown, standing: Confirm | undefined): Confirm | undefined {
  return perCall === undefined ? standing : checkConfirm(perCall);
}

/** What a server can confirm, learned once per connection (INFO persistence and server, COMMAND INFO WAITAOF, CONFIG GET appendfsync). */
interface ServerConfirmability {
  aof: boolean;
  waitaof: boolean;
  /** The server's name and version (INFO server: "valkey 8.0.1", "redis 7.4.2"). */
  server: { name: string; version: string };
  /** appendfsync, or undefined when CONFIG GET is refused. */
  appendfsync: string | undefined;
}

/**
 * Whether WAITAOF on this server acknowledges a write before it is fsynced under `appendfsync
 * everysec`: the empty-buffer path of its flushAppendOnlyFile advances the fsynced offset while
 * written data still waits for the next once-a-second fsync (introduced by redis/redis#12622 in
 * Redis 7.2.2, fixed by redis/redis#13793 in Redis 8.0.0; every Valkey release carries it, checked
 * on Valkey 8.0.1 by test/load/confirm-chaos.test.ts: confirmed adds were lost by a power cut).
 * Under `appendfsync always` every write is fsynced before its reply, so WAITAOF holds there.
 */
export function waitaofAcksBeforeFsync(server: { name: string; version: string }, appendfsync: string | undefined): boolean {
  if (appendfsync === 'always') return false;
  if (server.name === 'valkey') return true;
  const [major, minor, patch] = server.version.split('.').map(Number);
  const v = major * 10000 + minor * 100 + patch;
  return v >= 70202 && v < 80000;
}

/** The server's name and version from INFO server (a Valkey says server_name:valkey and valkey_version). */
export function serverOf(info: string): { name: string; version: string } {
  const field = (k: string) => new RegExp(`^${k}:(.*)$`, 'm').exec(info)?.[1]?.trim();
  const name = field('server_name') === 'valkey' ? 'valkey' : 'redis';
  return { name, version: (name === 'valkey' ? field('valkey_version') : undefined) ?? field('redis_version') ?? '0.0.0' };
}

const learned = new WeakMap<Redis, Promise<ServerConfirmability>>();

async function learn(node: Redis): Promise<ServerConfirmability> {
  // (one section per INFO: a server older than Redis 7 answers only one, and is then refused by name)
  const [persistence, server, cmd, appendfsync] = await Promise.all([
    node.info('persistence'),
    node.info('server'),
    node.call('COMMAND', 'INFO', 'WAITAOF') as Promise<unknown[]>,
    (node.call('CONFIG', 'GET', 'appendfsync') as Promise<string[]>).then((r) => (r?.[1] === undefined ? undefined : String(r[1])), () => undefined),
  ]);
  return { aof: /\baof_enabled:1\b/.test(persistence), waitaof: Array.isArray(cmd) && cmd[0] != null, server: serverOf(server), appendfsync };
}

function label(node: Redis): string {
  return hostLabel({ host: String(node.options.host ?? 'localhost'), port: Number(node.options.port ?? 6379) });
}

/**
 * Refuses a server where `confirm` cannot work: fsync asked of a server without its append-only
 * file, of a server older than WAITAOF (Valkey 8 and Redis 7.2 have it), or of one whose WAITAOF
 * acknowledges before the fsync (waitaofAcksBeforeFsync: Valkey under appendfsync everysec).
 * Learned once per connection (a later CONFIG SET appendfsync is seen by new connections).
 */
export async function checkConfirmable(node: Redis, confirm: Confirm): Promise<void> {
  let p = learned.get(node);
  if (!p) {
    p = learn(node);
    learned.set(node, p);
    p.catch(() => learned.delete(node));
  }
  const s = await p;
  if (confirm.fsync && !s.waitaof) {
    throw new NotSupportedError('ERR_NOT_SUPPORTED', `confirm.fsync needs WAITAOF, which the server ${label(node)} does not have: use Valkey 8 (or Redis 7.2+), or confirm with replicas only`);
  }
  if (confirm.fsync && !s.aof) {
    throw new NotSupportedError('ERR_NOT_SUPPORTED', `confirm.fsync needs the append-only file, and the server ${label(node)} runs with appendonly no: set appendonly yes (CONFIG SET appendonly yes, and in its config file), or confirm with replicas only`);
  }
  if (confirm.fsync && waitaofAcksBeforeFsync(s.server, s.appendfsync)) {
    const policy = s.appendfsync === undefined ? 'an appendfsync it would not tell (CONFIG GET refused)' : `appendfsync ${s.appendfsync}`;
    throw new NotSupportedError('ERR_NOT_SUPPORTED', `confirm.fsync cannot be kept on the server ${label(node)} (${s.server.name} ${s.server.version}, ${policy}): its WAITAOF acknowledges writes before they are fsynced unless appendfsync is always; set appendfsync always (CONFIG SET appendfsync always), or confirm with replicas only`);
  }
}

/**
 * Refuses, before anything is written, a `confirm` the primary holding `key` cannot keep (as
 * checkConfirmable); nothing when `confirm` is none. A Worker calls it at start, so a worker whose
 * finishes could never be confirmed stops there instead of failing every finish.
 */
export async function refuseUnconfirmable(client: Client, key: string, confirm: Confirm | undefined): Promise<void> {
  if (!confirm) return;
  const node = connectionFor(client, key);
  if (node) await checkConfirmable(node, confirm);
}

/** The confirming command for `confirm`: WAITAOF 1 n t (fsync), or WAIT n t (replicas only). */
function confirmCommand(confirm: Confirm): [string, ...number[]] {
  return confirm.fsync ? ['WAITAOF', 1, confirm.replicas, confirm.timeout] : ['WAIT', confirm.replicas, confirm.timeout];
}

/** What a WAITAOF / WAIT reply says was reached, and whether that is all `confirm` asked. */
export function judgeConfirmation(confirm: Confirm, reply: unknown): { held: boolean; reached: string } {
  const local = confirm.fsync ? Number((reply as unknown[])[0]) : 0;
  const replicas = confirm.fsync ? Number((reply as unknown[])[1]) : Number(reply);
  const parts: string[] = [];
  if (confirm.fsync) parts.push(local >= 1 ? 'fsynced locally' : 'not fsynced locally');
  if (confirm.replicas > 0) parts.push(`${confirm.fsync ? 'fsynced' : 'held'} on ${Math.min(replicas, confirm.replicas)} of ${confirm.replicas} replica${confirm.replicas === 1 ? '' : 's'}`);
  const held = (!confirm.fsync || local >= 1) && replicas >= confirm.replicas;
  return { held, reached: parts.join(', ') };
}

/** The socket a connection sends over now: another one after a reconnect. */
function socketOf(node: Redis): unknown {
  return (node as unknown as { stream?: unknown }).stream;
}

/** What the caller sees in a ConfirmTimeoutError: the operation and how to retry it. */
export interface ConfirmContext {
  /** The operation, e.g. "add of job 42 to queue q". */
  what: string;
  /** Runs the same call again (same once-only numbers) and confirms again. */
  retry?: () => Promise<unknown>;
}

function timeoutError(confirm: Confirm, reached: string, ctx: ConfirmContext, node: Redis): ConfirmTimeoutError {
  return new ConfirmTimeoutError(
    `${ctx.what}: the write was made on ${label(node)} but not confirmed within ${confirm.timeout} ms (${reached}); ` +
      'a retry is safe: it adds nothing twice (err.retry(), or the same call with the same jobId)',
    reached,
    ctx.retry,
  );
}

/**
 * Calls library function `fn` (a write) as callFunction does, then confirms it as `confirm` asks
 * (none: just the call). On a standalone client the confirmation is pipelined right behind the
 * write; a call that fails first (a missing library, a refusal) takes callFunction's path and is
 * confirmed after its reply. Rejects with ConfirmTimeoutError when the confirmation does not hold,
 * or when the connection changed between the write and its confirmation (a new connection's WAIT
 * would confirm nothing of the old one's write).
 */
export async function confirmedCall(
  client: Client,
  fn: string,
  metaKeys: string | string[],
  args: (string | number)[],
  confirm: Confirm | undefined,
  ctx: () => ConfirmContext,
): Promise<unknown> {
  if (!confirm) return callFunction(client, fn, metaKeys, args);
  const keys = typeof metaKeys === 'string' ? [metaKeys] : metaKeys;
  const first = connectionFor(client, keys[0]);
  if (first) await checkConfirmable(first, confirm);
  let reply: unknown;
  let node: Redis | undefined;
  let socket: unknown;
  let wait: Promise<unknown> | undefined;
  if (!isCluster(client) && first) {
    node = first;
    socket = socketOf(node);
    const write = node.fcall(fn, keys.length, ...keys, ...args);
    wait = node.call(...confirmCommand(confirm)); // right behind the write, in the same flush
    wait.catch(() => undefined); // a dropped connection rejects both at once: the write's rejection is the one reported
    try {
      reply = await write;
    } catch {
      // a missing library or a refusal: callFunction's path; confirmed after its reply
      wait.catch(() => undefined);
      wait = undefined;
      reply = await callFunction(client, fn, keys, args);
    }
  } else {
    reply = await callFunction(client, fn, keys, args);
  }
  if (!wait) {
    // (on a cluster: the connection to the slot's primary as the write found it, MOVED included)
    node = connectionFor(client, keys[0]);
    if (!node) throw timeoutError(confirm, 'no connection to the primary of its slot', ctx(), first as Redis);
    await checkConfirmable(node, confirm);
    socket ??= socketOf(node);
    wait = node.call(...confirmCommand(confirm));
  }
  const { held, reached } = judgeConfirmation(confirm, await wait);
  if (socketOf(node as Redis) !== socket) throw timeoutError(confirm, 'the connection was lost between the write and its confirmation', ctx(), node as Redis);
  if (!held) throw timeoutError(confirm, reached, ctx(), node as Redis);
  return reply;
}
