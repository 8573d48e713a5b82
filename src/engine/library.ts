/**
 * The Lua function library `glidemq`: assembled from lua/ in the order lua/ORDER gives, versioned by
 * a hash of that source, loaded with FUNCTION LOAD on every primary, and re-ensured whenever a
 * client becomes ready again. A server that holds a library written by a newer glidemq is never
 * downgraded: the client refuses with an error that says what to upgrade.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { type Client, clusterLabel, isCluster, isMovedError, nodeForKey, waitReady } from './connection.js';
import { ConnectionError, fromServerError, LibraryVersionError, wrongTypeError } from './errors.js';
import { queueStructureTypes } from './keys.js';

export const LIBRARY_NAME = 'glidemq';
const LUA_DIR = new URL('../../../lua/', import.meta.url);
const PACKAGE_VERSION: string = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')).version;

function assemble(): { code: string; version: string } {
  const order = readFileSync(new URL('ORDER', LUA_DIR), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const body = order.map((file) => `-- ==== ${file} ====\n${readFileSync(new URL(file, LUA_DIR), 'utf8')}`).join('\n');
  const version = createHash('sha256').update(body).digest('hex').slice(0, 16);
  const code =
    `#!lua name=${LIBRARY_NAME}\n` +
    body.replaceAll('__GLIDEMQ_LIBRARY_VERSION__', version).replaceAll('__GLIDEMQ_PACKAGE_VERSION__', PACKAGE_VERSION);
  return { code, version };
}

const assembled = assemble();
export const LIBRARY_CODE = assembled.code;
/** Hash of the Lua source: changes whenever any Lua file changes, never bumped by hand. */
export const LIBRARY_VERSION = assembled.version;
export const LIBRARY_PACKAGE_VERSION = PACKAGE_VERSION;

export interface ServerLibrary {
  version: string;
  package: string;
}

/** Reads the library version a node holds, or undefined when it has none. */
export async function serverLibrary(node: Redis): Promise<ServerLibrary | undefined> {
  try {
    const raw = (await node.call('FCALL_RO', 'glidemq_version', '0')) as string;
    return JSON.parse(raw) as ServerLibrary;
  } catch (err) {
    if (isMissingFunction(err)) return undefined;
    throw err;
  }
}

export function isMissingFunction(err: unknown): boolean {
  return err instanceof Error && /function not found|NOSCRIPT|Library .* not found/i.test(err.message);
}

/** Compares dotted numeric versions; returns >0 when a is newer than b. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  const pb = b.split(/[.-]/).map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

async function ensureOnNode(node: Redis): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const held = await serverLibrary(node);
    if (held?.version === LIBRARY_VERSION) return;
    if (held && compareVersions(held.package, PACKAGE_VERSION) > 0) {
      throw new LibraryVersionError(
        'ERR_LIBRARY_NEWER',
        `the server ${node.options.host}:${node.options.port} holds the glidemq library ${held.version} from glidemq ${held.package}, ` +
          `newer than this client (${PACKAGE_VERSION}); upgrade this glidemq instead of downgrading the server's library`,
      );
    }
    try {
      if (held) await node.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY_CODE);
      else await node.call('FUNCTION', 'LOAD', LIBRARY_CODE);
      return;
    } catch (err) {
      // Another client loaded it first: look again at what is there now.
      if (err instanceof Error && /already exists/i.test(err.message)) continue;
      throw err;
    }
  }
}

const inflight = new WeakMap<Client, Promise<void>>();
const watched = new WeakSet<Client>();
/** Per cluster client: the node connections known to hold this library while they serve as primaries. */
const ensuredNodes = new WeakMap<Cluster, WeakSet<Redis>>();

/**
 * Ensures the library on every primary of the client, single-flight per client, and again each
 * time the client reconnects (ioredis `ready`). A cluster client also checks, after every slot-map
 * refresh and new node connection, the primaries it has not ensured yet: a promoted replica gets the
 * library before the next function call lands on it.
 */
export function ensureLibrary(client: Client, force = false): Promise<void> {
  if (!watched.has(client)) {
    watched.add(client);
    const again = () => {
      inflight.delete(client);
      ensureLibrary(client, true).catch((err) => reportEnsureError(client, err));
    };
    client.on('ready', again);
    if (isCluster(client)) {
      const fresh = () => void ensureNewPrimaries(client).catch((err) => reportEnsureError(client, err));
      client.on('+node', fresh);
      client.on('refresh', fresh);
    }
  }
  let p = force ? undefined : inflight.get(client);
  if (!p) {
    p = isCluster(client) ? ensureOnCluster(client, true) : ensureOnNode(client as Redis);
    inflight.set(client, p);
    p.catch(() => inflight.delete(client));
  }
  return p;
}

/** A refused downgrade must reach the caller's error handler; a node that went away is not news. */
function reportEnsureError(client: Client, err: unknown): void {
  if (err instanceof LibraryVersionError) client.emit('error', err);
}

async function ensureOnCluster(cluster: Cluster, all: boolean): Promise<void> {
  if (cluster.status !== 'ready') await waitReady(cluster, clusterLabel(cluster), 15000);
  let done = ensuredNodes.get(cluster);
  if (!done || all) ensuredNodes.set(cluster, (done = new WeakSet()));
  const primaries = cluster.nodes('master').filter((n) => !done.has(n));
  const results = await Promise.allSettled(primaries.map((n) => ensureOnNode(n).then(() => done.add(n))));
  // A primary that is down right now is ensured when it (or its promoted replica) shows up in a
  // refreshed slot map; only a refused downgrade, or no primary at all answering, is an error.
  const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason);
  const refused = failures.find((e) => e instanceof LibraryVersionError);
  if (refused) throw refused;
  if (failures.length > 0 && failures.length === results.length) throw failures[0];
}

function ensureNewPrimaries(cluster: Cluster): Promise<void> {
  if (cluster.status !== 'ready') return Promise.resolve();
  const done = ensuredNodes.get(cluster);
  if (!done) return Promise.resolve(); // nobody asked for the library on this client yet
  if (cluster.nodes('master').every((n) => done.has(n))) return Promise.resolve();
  return ensureOnCluster(cluster, false);
}

/**
 * Calls a library function on the queue whose meta key is given. A reply saying the function is
 * missing (a flushed server, a promoted replica without it) triggers one ensure and one retry; on
 * a cluster the ensure includes the very node that serves the key's slot.
 */
export async function callFunction(client: Client, fn: string, metaKey: string, args: (string | number)[]): Promise<unknown> {
  try {
    return await client.fcall(fn, 1, metaKey, ...args);
  } catch (err) {
    if (isMovedError(err) && !isCluster(client)) throw notAClusterClient(client, err);
    if (isRawWrongType(err)) throw await nameWrongTypeKey(client, metaKey, err);
    if (!isMissingFunction(err)) throw fromServerError(err);
    await ensureLibrary(client, true);
    if (isCluster(client)) {
      const node = nodeForKey(client, metaKey);
      if (node) await ensureOnNode(node);
    }
    try {
      return await client.fcall(fn, 1, metaKey, ...args);
    } catch (err2) {
      throw fromServerError(err2);
    }
  }
}

function isRawWrongType(err: unknown): boolean {
  return err instanceof Error && /^WRONGTYPE/.test(err.message);
}

/**
 * Turns a server's bare WRONGTYPE (which names no key) into a typed error naming the queue key that
 * holds another type than glidemq keeps there; falls back to the generic typed error.
 */
export async function nameWrongTypeKey(client: Client, metaKey: string, err: unknown): Promise<unknown> {
  if (!isRawWrongType(err)) return fromServerError(err);
  const expected = queueStructureTypes(metaKey);
  try {
    const types = await Promise.all(expected.map(([key]) => client.type(key)));
    for (let i = 0; i < expected.length; i++) {
      const [key, want] = expected[i];
      if (types[i] !== 'none' && types[i] !== want) return wrongTypeError(key, types[i], want);
    }
  } catch {
    /* the diagnosis is best effort: report the server's own error */
  }
  return fromServerError(err);
}

/** A standalone client (one the caller made) is talking to a cluster node. */
function notAClusterClient(client: Client, err: unknown): ConnectionError {
  const o = (client as Redis).options;
  return new ConnectionError(
    'ERR_CLUSTER',
    `the server ${o.host}:${o.port} is a Valkey cluster node (${(err as Error).message.split(' ').slice(0, 2).join(' ')}): ` +
      'connect with a cluster client (--cluster, or { url, cluster: true }, or an ioredis Cluster)',
  );
}
