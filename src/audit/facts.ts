/**
 * Reads what the checks need from one node, tolerating refusals: CONFIG may be renamed or
 * blocked (managed services), ACL or FUNCTION may be denied. A refusal leaves the fact unset, so
 * the check says `unknown` rather than guessing.
 */
import type { Redis } from 'ioredis';
import { LibraryVersionError } from '../engine/shared/errors.js';
import { declaredVersion, libraryCode, sha256 } from '../engine/connecting/library.js';
import { pairsToMap } from '../engine/shared/replies.js';
import type { AclFacts, LibraryFacts, NodeFacts, NodeRole, ReplicaLink } from './types.js';

/** The settings the checks read. `requirepass` is read only to learn whether it is empty. */
export const CONFIG_NAMES = [
  'appendonly',
  'appendfsync',
  'aof-use-rdb-preamble',
  'save',
  'maxmemory-policy',
  'no-appendfsync-on-rewrite',
  'auto-aof-rewrite-percentage',
  'stop-writes-on-bgsave-error',
  'bind',
  'protected-mode',
  'requirepass',
  'min-replicas-to-write',
  'min-replicas-max-lag',
] as const;

/** INFO text → field map across all sections. */
export function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    if (!line || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon > 0) out.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return out;
}

/** `slave0:ip=10.0.0.2,port=6379,state=online,offset=1,lag=0` entries of INFO replication. */
export function replicaLinks(info: Map<string, string>): ReplicaLink[] {
  const links: ReplicaLink[] = [];
  for (const [key, value] of info) {
    if (!/^slave\d+$/.test(key)) continue;
    const fields = new Map(value.split(',').map((kv) => kv.split('=') as [string, string]));
    const lag = fields.get('lag');
    links.push({
      address: `${fields.get('ip') ?? '?'}:${fields.get('port') ?? '?'}`,
      state: fields.get('state') ?? 'unknown',
      lagSeconds: lag === undefined ? undefined : Number(lag),
    });
  }
  return links;
}

/** A reply's name/value pairs with every value as text (CONFIG GET, ACL GETUSER). */
function textPairs(reply: unknown): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of pairsToMap(reply)) out.set(k, String(v));
  return out;
}

function errorText(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.split('\n')[0].replace(/\.$/, '');
}

interface ConfigFacts {
  config: Map<string, string>;
  refused?: string;
}

async function readConfig(client: Redis): Promise<ConfigFacts> {
  let reply: unknown;
  try {
    reply = await client.call('CONFIG', 'GET', ...CONFIG_NAMES);
  } catch (err) {
    const text = errorText(err);
    // Servers before 7.0 take one pattern per CONFIG GET; anything else is a refusal.
    if (!/wrong number of arguments/i.test(text)) return { config: new Map(), refused: text };
    const config = new Map<string, string>();
    for (const name of CONFIG_NAMES) {
      try {
        for (const [k, v] of textPairs(await client.call('CONFIG', 'GET', name))) config.set(k, v);
      } catch {
        // a single refused setting stays unknown
      }
    }
    return { config };
  }
  return { config: textPairs(reply) };
}

/** The default user can run commands without a password: from ACL, else from requirepass. */
async function readPasswordless(client: Redis, config: Map<string, string>): Promise<boolean | undefined> {
  try {
    const reply = (await client.call('ACL', 'GETUSER', 'default')) as unknown;
    const fields = textPairs(reply);
    const flagsIndex = Array.isArray(reply) ? reply.indexOf('flags') : -1;
    const flags = flagsIndex >= 0 ? (reply as unknown[])[flagsIndex + 1] : fields.get('flags');
    const list = Array.isArray(flags) ? flags.map(String) : String(flags ?? '').split(',');
    if (list.length && list[0] !== '') return list.includes('on') && list.includes('nopass');
  } catch {
    // ACL refused or absent: fall back to requirepass
  }
  const requirepass = config.get('requirepass');
  if (requirepass === undefined) return undefined;
  return requirepass === '';
}

/**
 * The glidemq library's code (FUNCTION LIST ... WITHCODE) and what it declares about its version.
 * Read from the text, never by calling it: a library someone swapped would otherwise run with the
 * auditor's rights.
 */
async function readLibrary(client: Redis): Promise<LibraryFacts> {
  let code: string | undefined;
  try {
    code = await libraryCode(client);
  } catch (err) {
    const denied = err instanceof LibraryVersionError && err.code === 'ERR_LIBRARY_UNVERIFIED';
    return { state: 'unknown', error: denied ? 'NOPERM: this user may not run FUNCTION LIST' : errorText(err) };
  }
  if (code === undefined) return { state: 'missing' };
  const declared = declaredVersion(code);
  return {
    state: 'present',
    version: declared?.version,
    packageVersion: declared?.package,
    codeSha256: sha256(code),
    ...(declared ? {} : { error: 'its code registers no glidemq_version' }),
  };
}

/**
 * The ACL users and their rules, without their password hashes (`#...`, never kept in the facts);
 * an auditor without acl|list learns nothing here.
 */
async function readAcl(client: Redis): Promise<AclFacts> {
  try {
    const reply = await client.call('ACL', 'LIST');
    const lines = Array.isArray(reply) ? reply.map(String) : [];
    return { lines: lines.map((l) => l.split(' ').filter((t) => !/^[#>!<]/.test(t)).join(' ')) };
  } catch (err) {
    return { error: errorText(err) };
  }
}

export function roleFromInfo(info: Map<string, string>): NodeRole {
  return info.get('role') === 'slave' ? 'replica' : 'master';
}

export async function gatherFacts(
  client: Redis,
  address: string,
  inCluster: boolean,
): Promise<NodeFacts> {
  // the sections the checks read (replication first: a role may read INFO replication and the
  // sections named after it, never a bare INFO with the keyspace of every database)
  const info = parseInfo(String(await client.call('INFO', 'replication', 'persistence', 'memory', 'stats', 'server')));
  const [{ config, refused }, library, acl] = await Promise.all([readConfig(client), readLibrary(client), readAcl(client)]);
  const passwordless = await readPasswordless(client, config);
  const waitaof = await readWaitaof(client);
  config.delete('requirepass'); // never keep a secret in the facts
  return {
    address,
    role: roleFromInfo(info),
    inCluster,
    config,
    configRefused: refused,
    info,
    replicas: replicaLinks(info),
    library,
    passwordless,
    acl,
    waitaof,
  };
}

/** Whether the node has WAITAOF (confirmed fsynced writes: Valkey 8, Redis 7.2+); undefined if COMMAND INFO is refused. */
async function readWaitaof(client: Redis): Promise<boolean | undefined> {
  try {
    const reply = (await client.call('COMMAND', 'INFO', 'WAITAOF')) as unknown[];
    return Array.isArray(reply) && reply[0] != null;
  } catch {
    return undefined;
  }
}
