/**
 * One FCALL (or FCALL_RO) on the wire. ioredis's own fcall copies a command's arguments with
 * Array.prototype.flat, which V8 runs at about 0.1 µs an argument: a worker's finish of 40 jobs
 * (7 arguments each) spent ~30 µs in it, about 1 µs of client CPU per job, more than the job's own
 * bookkeeping. A call with many arguments is therefore sent as an ioredis Command built here, its
 * arguments turned to text as ioredis would (toArg) in one plain loop, through the client's
 * sendCommand (which still queues it offline, routes it in a cluster, times it out and traces it).
 * A client whose options change the arguments on the way (keyPrefix) or batch commands
 * (enableAutoPipelining) takes ioredis's own path, as does a short call.
 */
import { Command } from 'ioredis';
import type { Client } from './connection.js';

/** Calls with at least this many arguments (after the function's name) are built here. */
const DIRECT_ARGS = 24;

/** `fn` with `keys` and `args`, as FCALL_RO when `readOnly`. */
export function sendFunction(client: Client, fn: string, keys: string[], args: (string | number)[], readOnly: boolean): Promise<unknown> {
  if (keys.length + args.length >= DIRECT_ARGS && sendsAsGiven(client)) return sendDirect(client, readOnly ? 'fcall_ro' : 'fcall', fn, keys, args);
  return readOnly ? client.fcall_ro(fn, keys.length, ...keys, ...args) : client.fcall(fn, keys.length, ...keys, ...args);
}

/**
 * The client sends a command's arguments as they are: no key prefix, no auto-pipelining (and it is
 * an ioredis client: a stand-in without options or sendCommand takes fcall).
 */
function sendsAsGiven(client: Client): boolean {
  const o = client.options as { keyPrefix?: unknown; enableAutoPipelining?: unknown } | undefined;
  return o !== undefined && !o.keyPrefix && !o.enableAutoPipelining && typeof client.sendCommand === 'function';
}

function sendDirect(client: Client, name: 'fcall' | 'fcall_ro', fn: string, keys: string[], args: (string | number)[]): Promise<unknown> {
  const friendly = (client.options as { showFriendlyErrorStack?: boolean }).showFriendlyErrorStack;
  // made with no arguments (ioredis flattens and converts them in the constructor), given them below
  const command = new Command(name, [], { replyEncoding: 'utf8', errorStack: friendly ? new Error() : undefined });
  const all = new Array<string>(2 + keys.length + args.length);
  all[0] = fn;
  all[1] = String(keys.length);
  let i = 2;
  for (const key of keys) all[i++] = key;
  for (const arg of args) all[i++] = typeof arg === 'string' ? arg : argText(arg);
  command.args = all;
  return client.sendCommand(command) as Promise<unknown>;
}

/** A non-string argument as ioredis writes it (its toArg): a whole number beyond 2^53 in full digits. */
function argText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) return BigInt(v).toString();
  return String(v);
}
