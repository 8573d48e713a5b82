/**
 * The Lua function library `glidemq` on the server: its code (library-code.ts, assembled from lua/
 * and versioned by a hash of that source) is loaded with FUNCTION LOAD on every primary, and
 * re-ensured whenever a client becomes ready again. A server that holds a library written by a newer glidemq is never
 * downgraded: the client refuses with an error that says what to upgrade.
 *
 * A function runs with the rights of whoever calls it, so a client checks the library's CODE (not
 * the version it reports, which anyone can copy) before it calls anything on a node, and refuses a
 * library that differs from its own in any way but a clean older or newer build. A user that may
 * not FUNCTION LOAD (the producer, worker and operator roles in the README) never loads: it is told
 * that an administrator must run `glidemq library install`.
 */
import type { Cluster, Redis } from 'ioredis';
import { type Client, clusterLabel, isCluster, isMovedError, nodeForKey, waitReady } from './connection.js';
import { ConnectionError, fromServerError, LibraryVersionError, wrongTypeError } from '../shared/errors.js';
import { queueStructureTypes } from '../shared/keys.js';
import {
  LIBRARY_CODE,
  LIBRARY_CODE_BYTES,
  LIBRARY_CODE_SHA256,
  LIBRARY_NAME,
  LIBRARY_PACKAGE_VERSION as PACKAGE_VERSION,
  LIBRARY_VERSION,
  sha256,
} from './library-code.js';
import { pairsToMap } from '../shared/replies.js';
import { sendFunction } from './function-call.js';

// The code itself lives in library-code.ts; its names stay importable from here.
export {
  LIBRARY_CODE,
  LIBRARY_CODE_SHA256,
  LIBRARY_NAME,
  LIBRARY_PACKAGE_VERSION,
  LIBRARY_VERSION,
  sha256,
  writeLibrarySnapshot,
} from './library-code.js';

export interface ServerLibrary {
  version: string;
  package: string;
}

/**
 * Reads the library version a node holds by calling its glidemq_version, or undefined when it has
 * none. This RUNS the node's code: use it only where that code is already trusted (tests, a node
 * this client verified); everything that decides whether to trust a node reads its code instead.
 */
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

/**
 * The version a library's code declares in its glidemq_version (lua/version.lua), read from the
 * text: deciding whether to trust a library must not run it. Undefined for code that registers no
 * glidemq_version or carries no version JSON, which no glidemq release wrote.
 */
export function declaredVersion(code: string): ServerLibrary | undefined {
  if (!code.includes("'glidemq_version'") && !code.includes('"glidemq_version"')) return undefined;
  // The JSON glidemq_version returns, as the loader wrote it (no spaces, unlike the file's header comment).
  const m = /"version":"([^"\\]*)","package":"([^"\\]*)"/.exec(code);
  return m ? { version: m[1], package: m[2] } : undefined;
}

/**
 * What a node holds, next to this client's library:
 * - current: exactly this client's code;
 * - missing: no library named glidemq;
 * - older: another glidemq build, not from a newer package (a client allowed to FUNCTION LOAD replaces it);
 * - newer: a build from a newer glidemq package (never downgraded: upgrade the client);
 * - swapped: it reports this client's version but its code differs (someone loaded their own);
 * - foreign: it declares no glidemq version at all.
 */
export type LibraryState = 'current' | 'missing' | 'older' | 'newer' | 'swapped' | 'foreign';

export interface NodeLibrary {
  /** host:port of the node. */
  address: string;
  state: LibraryState;
  /** What the node's library declares (read from its code), when it declares it. */
  version?: string;
  package?: string;
  /** sha256 of the node's library code; undefined when it has none. */
  codeSha256?: string;
}

export function judgeLibrary(address: string, code: string | undefined): NodeLibrary {
  if (code === undefined) return { address, state: 'missing' };
  // this client's own code, the common case at every connection: its hash is known already
  if (code === LIBRARY_CODE) return currentLibrary(address);
  const codeSha256 = sha256(code);
  const declared = declaredVersion(code);
  if (!declared) return { address, state: 'foreign', codeSha256 };
  const state: LibraryState =
    declared.version === LIBRARY_VERSION ? 'swapped' : compareVersions(declared.package, PACKAGE_VERSION) > 0 ? 'newer' : 'older';
  return { address, state, version: declared.version, package: declared.package, codeSha256 };
}

function currentLibrary(address: string): NodeLibrary {
  return { address, state: 'current', version: LIBRARY_VERSION, package: PACKAGE_VERSION, codeSha256: LIBRARY_CODE_SHA256 };
}

export function nodeAddress(node: Redis): string {
  const host = node.options.host ?? '127.0.0.1';
  return `${host.includes(':') ? `[${host}]` : host}:${node.options.port ?? 6379}`;
}

function isNoPermission(err: unknown): boolean {
  return err instanceof Error && /^NOPERM|no permissions/i.test(err.message);
}

/**
 * The code of the node's glidemq library (FUNCTION LIST ... WITHCODE), or undefined when it has
 * none. A user who may not list functions cannot verify the library, and gets an error saying so.
 */
export async function libraryCode(node: Redis): Promise<string | undefined> {
  return (await libraryCodeBytes(node))?.toString('utf8');
}

/**
 * libraryCode as the node sent it, in UTF-8 bytes: a check that finds this client's own code
 * compares bytes, and decodes nothing (some 2 ms of every connection for 450 KB of Lua).
 */
async function libraryCodeBytes(node: Redis): Promise<Buffer | undefined> {
  let listed: unknown;
  try {
    listed = await node.callBuffer('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY_NAME, 'WITHCODE');
  } catch (err) {
    if (!isNoPermission(err)) throw err;
    throw new LibraryVersionError(
      'ERR_LIBRARY_UNVERIFIED',
      `this user may not run FUNCTION LIST on ${nodeAddress(node)}, so the glidemq library there cannot be checked before use, ` +
        'and glidemq runs no library it has not checked: grant the user function|list (README "ACL roles")',
    );
  }
  // LIBRARYNAME matches as a pattern (and by substring on some servers): look for the exact name.
  for (const lib of Array.isArray(listed) ? listed : []) {
    const fields = pairsToMap(lib);
    if (String(fields.get('library_name')) === LIBRARY_NAME) {
      const code = fields.get('library_code');
      return Buffer.isBuffer(code) ? code : Buffer.from(fields.has('library_code') ? String(code) : '', 'utf8');
    }
  }
  return undefined;
}

/** What a node holds, judged against this client's library, without running any of it. */
export async function inspectNode(node: Redis): Promise<NodeLibrary> {
  const code = await libraryCodeBytes(node);
  // byte for byte this client's code: judgeLibrary would find it 'current' after decoding it
  if (code?.equals(LIBRARY_CODE_BYTES)) return currentLibrary(nodeAddress(node));
  return judgeLibrary(nodeAddress(node), code?.toString('utf8'));
}

/** The command an administrator runs to put this client's library on the node. */
function installCommand(node: Redis, cluster: boolean): string {
  const scheme = node.options.tls ? 'rediss' : 'redis';
  return `glidemq library install --url ${scheme}://${nodeAddress(node)}${cluster ? ' --cluster' : ''}`;
}

/** Why this client will not use what the node holds, or undefined when it may (or may replace it). */
function refusal(node: Redis, found: NodeLibrary, cluster: boolean): LibraryVersionError | undefined {
  const where = nodeAddress(node);
  const reinstall =
    `This client will not run it. An administrator reinstalls the library with \`${installCommand(node, cluster)}\` ` +
    'and checks which users may FUNCTION LOAD (`glidemq audit` lists them; README "ACL roles")';
  if (found.state === 'swapped') {
    return new LibraryVersionError(
      'ERR_LIBRARY_MISMATCH',
      `the server ${where} holds a glidemq library that reports this client's version ${LIBRARY_VERSION}, but its code differs from ` +
        `the library glidemq ${PACKAGE_VERSION} ships: someone allowed to FUNCTION LOAD replaced it. ${reinstall}`,
    );
  }
  if (found.state === 'foreign') {
    return new LibraryVersionError(
      'ERR_LIBRARY_MISMATCH',
      `the server ${where} holds a library named glidemq that declares no glidemq version, so no glidemq release wrote it. ${reinstall}`,
    );
  }
  if (found.state === 'newer') {
    return new LibraryVersionError(
      'ERR_LIBRARY_NEWER',
      `the server ${where} holds the glidemq library ${found.version} from glidemq ${found.package}, ` +
        `newer than this client (${PACKAGE_VERSION}); upgrade this glidemq instead of downgrading the server's library`,
    );
  }
  return undefined;
}

/** A missing or older library, and a user who may not load one: only an administrator can help. */
function notInstalled(node: Redis, found: NodeLibrary, cluster: boolean): LibraryVersionError {
  const where = nodeAddress(node);
  const what =
    found.state === 'missing'
      ? `the glidemq library ${LIBRARY_VERSION} (glidemq ${PACKAGE_VERSION}) is not installed on ${where}`
      : `the server ${where} holds the glidemq library ${found.version} from glidemq ${found.package}, not this client's ` +
        `${LIBRARY_VERSION} (glidemq ${PACKAGE_VERSION})`;
  return new LibraryVersionError(
    'ERR_LIBRARY_NOT_INSTALLED',
    `${what} and this user may not load it (FUNCTION LOAD is refused): an administrator runs \`${installCommand(node, cluster)}\` ` +
      '(README "ACL roles")',
  );
}

/**
 * Makes sure the node holds exactly this client's library before anything of it runs: verifies
 * the code (not only the version it reports), loads it where the node has none or an older one,
 * and refuses a swapped, foreign or newer library. Runs once per node connection (ensureLibrary).
 */
async function ensureOnNode(node: Redis, cluster = false): Promise<void> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const found = await inspectNode(node);
    if (found.state === 'current') return;
    const refused = refusal(node, found, cluster);
    if (refused) throw refused;
    try {
      await loadOn(node, found.state !== 'missing');
      return;
    } catch (err) {
      // Another client loaded one first: look again at what is there now.
      if (err instanceof Error && /already exists/i.test(err.message)) continue;
      if (isNoPermission(err)) throw notInstalled(node, found, cluster);
      throw err;
    }
  }
  throw new LibraryVersionError(
    'ERR_LIBRARY_MISMATCH',
    `the glidemq library on ${nodeAddress(node)} changed three times while this client was loading it: another client keeps replacing it`,
  );
}

function loadOn(node: Redis, replace: boolean): Promise<unknown> {
  return replace ? node.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY_CODE) : node.call('FUNCTION', 'LOAD', LIBRARY_CODE);
}

/** The primaries of a client: the server itself, or every primary a cluster client knows. */
async function primariesOf(client: Client): Promise<Redis[]> {
  if (!isCluster(client)) return [client as Redis];
  if (client.status !== 'ready') await waitReady(client, clusterLabel(client), 15000);
  return client.nodes('master');
}

/** Per primary: what it holds, judged against this client's library (`glidemq library status`). */
export async function libraryStatus(client: Client): Promise<NodeLibrary[]> {
  const nodes = await Promise.all((await primariesOf(client)).map((n) => inspectNode(n)));
  return nodes.sort((a, b) => a.address.localeCompare(b.address));
}

export interface InstallResult extends NodeLibrary {
  /** What the node held before. */
  before: LibraryState;
  /**
   * unchanged: it already held this library; installed: it held none; replaced: it held another;
   * refused: it holds a newer glidemq's library (replaced only with force); failed: see error.
   */
  action: 'unchanged' | 'installed' | 'replaced' | 'refused' | 'failed';
  /** Why this node was not installed: one line naming the node. */
  error?: string;
}

/**
 * Puts this client's library on every primary (`glidemq library install`), for an administrator:
 * idempotent, and the remedy for a swapped or foreign library, which it replaces. A library from a
 * newer glidemq is only replaced with `force` (a deliberate downgrade). Each node is read back.
 */
export async function installLibrary(client: Client, opts: { force?: boolean } = {}): Promise<InstallResult[]> {
  const results = await Promise.all((await primariesOf(client)).map((n) => installOn(n, !!opts.force)));
  return results.sort((a, b) => a.address.localeCompare(b.address));
}

async function installOn(node: Redis, force: boolean): Promise<InstallResult> {
  let before: NodeLibrary = { address: nodeAddress(node), state: 'missing' };
  try {
    before = await inspectNode(node);
    if (before.state === 'current') return { ...before, before: 'current', action: 'unchanged' };
    if (before.state === 'newer' && !force) {
      const why = `holds the glidemq library ${before.version} from glidemq ${before.package}, newer than this glidemq (${PACKAGE_VERSION}): upgrade this glidemq, or pass --force to downgrade the node`;
      return { ...before, before: 'newer', action: 'refused', error: `${before.address} ${why}` };
    }
    await loadOn(node, before.state !== 'missing').catch((err: unknown) => {
      // A library loaded by someone else in the meantime is replaced like any other.
      if (err instanceof Error && /already exists/i.test(err.message)) return loadOn(node, true);
      throw err;
    });
    const after = await inspectNode(node);
    if (after.state !== 'current') {
      return { ...after, before: before.state, action: 'failed', error: `${after.address} holds another library right after the install (${after.state}): another client replaced it` };
    }
    return { ...after, before: before.state, action: before.state === 'missing' ? 'installed' : 'replaced' };
  } catch (err) {
    const text = err instanceof Error ? err.message : String(err);
    const error = isNoPermission(err)
      ? `this user may not FUNCTION LOAD on ${before.address}: run the install as an administrator (README "ACL roles")`
      : err instanceof LibraryVersionError
        ? text
        : `${before.address}: ${text}`;
    return { ...before, before: before.state, action: 'failed', error };
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
  const results = await Promise.allSettled(primaries.map((n) => ensureOnNode(n, true).then(() => done.add(n))));
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
 * The functions lua/ registers with the 'no-writes' flag. They are called with FCALL_RO, which a
 * user whose ACL allows only `+fcall_ro` (a dashboard, a monitor) may send, and which a replica
 * serves. test/unit/lua-contract.test.ts checks this list against lua/.
 */
export const READ_ONLY_FUNCTIONS: ReadonlySet<string> = new Set([
  'glidemq_version', 'glidemq_getCounts', 'glidemq_listJobs', 'glidemq_getMetrics', 'glidemq_listClaims',
  'glidemq_ownClaims', 'glidemq_oldestWaiting', 'glidemq_bcSubscriptions', 'glidemq_outboxList',
  'glidemq_flowJournalDue',
  'glidemq_deadOutboxList',
  'glidemq_searchJobs',
]);

function send(client: Client, fn: string, keys: string[], args: (string | number)[]): Promise<unknown> {
  return sendFunction(client, fn, keys, args, READ_ONLY_FUNCTIONS.has(fn));
}

/**
 * Calls a library function on the queue whose meta key is given. A reply saying the function is
 * missing (a flushed server, a promoted replica without it) triggers one ensure and one retry; on
 * a cluster the ensure includes the very node that serves the key's slot.
 */
export async function callFunction(client: Client, fn: string, metaKeys: string | string[], args: (string | number)[]): Promise<unknown> {
  // (several meta keys: a flow's queues, lua/flow.lua; the first one routes the call)
  const keys = typeof metaKeys === 'string' ? [metaKeys] : metaKeys;
  const metaKey = keys[0];
  try {
    return await send(client, fn, keys, args);
  } catch (err) {
    if (isMovedError(err) && !isCluster(client)) throw notAClusterClient(client, err);
    if (isRawWrongType(err)) throw await nameWrongTypeKey(client, metaKey, err);
    if (!isMissingFunction(err)) throw fromServerError(err);
    await ensureLibrary(client, true);
    if (isCluster(client)) {
      const node = nodeForKey(client, metaKey);
      if (node) await ensureOnNode(node, true);
    }
    try {
      return await send(client, fn, keys, args);
    } catch (err2) {
      throw fromServerError(err2);
    }
  }
}

/**
 * A WRONGTYPE that names no key: the server's bare one, or the library's ERR_WRONG_TYPE for a
 * command that failed on a key the function did not check by name (lua/helpers.lua codedError).
 */
function isRawWrongType(err: unknown): boolean {
  return err instanceof Error && /^(WRONGTYPE|ERR_WRONG_TYPE glidemq_\w+: a key it uses)/.test(err.message);
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
