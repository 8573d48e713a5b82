/**
 * What counts as a client: an ioredis client (standalone or cluster) of this or another major
 * version, recognised by its shape (a BullMQ application's ioredis 5 client is no instance of
 * glidemq's ioredis 6 classes).
 */
import { Cluster, Redis } from 'ioredis';

export type Client = Redis | Cluster;

/**
 * An ioredis client of another major version (a BullMQ application's ioredis 5), as TypeScript sees
 * it: the members glidemq uses. At run time a client is recognised by the same shape (isClient).
 */
export interface ForeignClient {
  readonly status: string;
  readonly options: object;
  duplicate(...args: never[]): unknown;
  call(...args: never[]): unknown;
  fcall(...args: never[]): unknown;
  sendCommand(...args: never[]): unknown;
  connect(...args: never[]): unknown;
  quit(...args: never[]): unknown;
  disconnect(...args: never[]): unknown;
  on(...args: never[]): unknown;
  off(...args: never[]): unknown;
}

/** What glidemq calls on a client it is given; a client of any ioredis major (5, 6) has them all. */
export const CLIENT_METHODS = ['duplicate', 'call', 'fcall', 'sendCommand', 'connect', 'quit', 'disconnect', 'on', 'off'] as const;

/**
 * The members a client-like object lacks (empty: it is usable as a client). Recognised by shape, not
 * `instanceof`: a BullMQ application's ioredis 5 client is no instance of glidemq's ioredis 6 classes.
 * A cluster client (`isCluster: true`) also needs `nodes()`.
 */
export function missingClientMembers(x: object): string[] {
  const o = x as Record<string, unknown>;
  const missing: string[] = CLIENT_METHODS.filter((m) => typeof o[m] !== 'function');
  if (typeof o.status !== 'string') missing.push('status');
  if (typeof o.options !== 'object' || o.options === null) missing.push('options');
  if (o.isCluster === true && typeof o.nodes !== 'function') missing.push('nodes');
  return missing;
}

/** True for an ioredis client (standalone or cluster) of any major version. */
export function isClient(x: unknown): x is Client {
  if (x instanceof Redis || x instanceof Cluster) return true;
  return typeof x === 'object' && x !== null && missingClientMembers(x).length === 0;
}

export function isCluster(c: Client): c is Cluster {
  // `isCluster` is ioredis's own flag (true on Cluster, false on Redis), set by versions 5 and 6 alike.
  return c instanceof Cluster || (c as { isCluster?: unknown }).isCluster === true;
}
