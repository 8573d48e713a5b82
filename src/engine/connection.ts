/**
 * Connection options: URL parsing (redis/rediss/valkey/valkeys, and their +sentinel forms), password
 * redaction, and the construction of ioredis clients (standalone, through Sentinel, or cluster) from
 * a URL, options or an instance.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { Redis, Cluster, ReplyError, type RedisOptions, type ClusterOptions } from 'ioredis';
import { ConnectionError, InvalidArgumentError, invalid } from './errors.js';
import {
  describeSentinelFailure, isSentinelUrl, parseSentinelError, sentinelClientOptions, sentinelLabel, sentinelUrlFromOptions,
  splitSentinelUrl, type SentinelTarget,
} from './sentinel.js';

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

export type ConnectionInput =
  | string
  | URL
  | RedisOptions
  | Client
  | ForeignClient
  | { url: string; cluster?: boolean; password?: string; tlsCa?: string; options?: RedisOptions };

export interface ParsedUrl {
  /** The URL rewritten to a redis scheme (ioredis reads the db number only for those); a Sentinel URL as given. */
  url: string;
  /** The server; for a Sentinel URL, the first sentinel (the primary is known only once they are asked). */
  host: string;
  port: number;
  tls: boolean;
  username?: string;
  password?: string;
  db: number;
  /** A `redis+sentinel://` URL: the sentinels to ask, and the master name they monitor. */
  sentinel?: SentinelTarget;
}

export const DEFAULT_URL = 'redis://127.0.0.1:6379';

/**
 * A connection that has commands outstanding but receives nothing for this long is treated as
 * dead (a partition, a hung server, a connection a middlebox forgot) and is reconnected; its
 * unanswered commands are sent again on the new connection. Blocking reads add their own block
 * time on top. Override with the ioredis option `socketTimeout`.
 */
export const DEFAULT_SOCKET_TIMEOUT = 15_000;

export function parseUrl(raw: string): ParsedUrl {
  if (isSentinelUrl(raw)) {
    // The hosts and the master name come out first; credentials and database follow the plain rules.
    const { plain, target } = splitSentinelUrl(raw, redactUrl(raw));
    const parsed = parseServerUrl(plain, raw);
    return { ...parsed, url: raw, host: target.sentinels[0].host, port: target.sentinels[0].port, sentinel: target };
  }
  return parseServerUrl(raw, raw);
}

/** `text` is the URL to parse, `raw` the one the caller gave (what messages show, redacted). */
function parseServerUrl(text: string, raw: string): ParsedUrl {
  const rewritten = text.replace(/^valkey(s?):\/\//i, (_m, s: string) => `redis${s}://`);
  let u: URL;
  try {
    u = new URL(rewritten);
  } catch {
    throw invalid(`invalid server URL "${redactUrl(raw)}": expected redis://[user:password@]host:port[/db]${raw.includes('@') ? ENCODE_HINT : ''}`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw invalid(
      `unsupported URL scheme "${u.protocol}" in ${redactUrl(raw)}: use redis://, rediss://, valkey:// or valkeys:// (or redis+sentinel://host:26379,.../<master name>)`,
    );
  }
  // An "@" past the host is a password that held "/", "?" or "#" unencoded: the parse took part of it
  // for the host and port. Connecting there would send the rest of the password nowhere useful.
  if (`${u.pathname}${u.search}${u.hash}`.includes('@')) {
    throw invalid(`invalid server URL "${redactUrl(raw)}": an "@" after a "/", "?" or "#"${ENCODE_HINT}`);
  }
  if (u.hostname === '') throw invalid(`invalid server URL "${redactUrl(raw)}": no host (expected redis://[user:password@]host:port[/db])`);
  const dbText = u.pathname.replace(/^\//, '');
  const db = dbText === '' ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0) throw invalid(`invalid database number "${dbText}" in ${redactUrl(raw)}`);
  const port = u.port === '' ? 6379 : Number(u.port);
  return {
    url: rewritten,
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port,
    tls: u.protocol === 'rediss:',
    username: u.username ? decodeCredential(u.username, raw) : undefined,
    password: u.password ? decodeCredential(u.password, raw) : undefined,
    db,
  };
}

const ENCODE_HINT = '; in a user name or password write "/" as %2F, "?" as %3F, "#" as %23 and "%" as %25';

function decodeCredential(text: string, raw: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw invalid(`invalid server URL "${redactUrl(raw)}": a "%" in the user name or password is not followed by two hex digits${ENCODE_HINT}`);
  }
}

/**
 * `redis://user:secret@h:1` → `redis://user:***@h:1`; never let a password reach output.
 *
 * The URL parser the connection uses (WHATWG `URL`) takes the credentials to be everything before
 * the last "@" of the authority, the user name ending at the first ":" — so `redis://u:p@ss@h`
 * authenticates as `u` with `p@ss`. Redaction cuts at the same places, and goes further when the
 * parse would not find the credentials: everything up to the last "@" anywhere in the text is hidden
 * (a password with an unencoded "/", "?" or "#" ends the authority early, and the URL is then
 * refused with a message that must not show it), and a text that does not parse at all is treated
 * the same way. Only the user name (the text before the first ":") is kept.
 */
export function redactUrl(raw: string): string {
  const head = /^[a-z][a-z0-9+.-]*:\/{0,2}/i.exec(raw)?.[0] ?? '';
  const rest = raw.slice(head.length);
  const at = rest.lastIndexOf('@');
  if (at < 0) return raw;
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  const shown = colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`;
  return `${head}${shown}@${rest.slice(at + 1)}`;
}

export interface ClientSettings {
  url: string;
  cluster: boolean;
  password?: string;
  /**
   * PEM file of the certificate authority a `rediss://` server's certificate is checked against
   * (default `$GLIDEMQ_TLS_CA`; without one, the system's trusted authorities).
   */
  tlsCa?: string;
  /** Extra ioredis options (tests use these for retry behaviour). */
  options?: RedisOptions;
}

export function redisOptionsFromUrl(parsed: ParsedUrl, password?: string, tlsCa = process.env.GLIDEMQ_TLS_CA): RedisOptions {
  const opts: RedisOptions = {
    host: parsed.host,
    port: parsed.port,
    db: parsed.db,
    username: parsed.username,
    password: parsed.password ?? password,
  };
  if (parsed.tls) {
    opts.tls = {
      // SNI takes host names only; an IP address is checked against the certificate's IP entries.
      // Through Sentinel the server is known only once asked for: each host is checked by its address.
      ...(isIP(parsed.host) || parsed.sentinel ? {} : { servername: parsed.host }),
      rejectUnauthorized: process.env.GLIDEMQ_TLS_INSECURE !== '1',
      ...(tlsCa ? { ca: [readCa(tlsCa)] } : {}),
    };
  }
  return opts;
}

function readCa(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw invalid(`cannot read the TLS certificate authority file "${path}" (--tls-ca or $GLIDEMQ_TLS_CA): ${code}`);
  }
}

/** Creates a new ioredis client for the settings. Callers own it and must `quit()` it. */
export function createClient(settings: ClientSettings, extra: RedisOptions = {}, seeds?: Seed[]): Client {
  const parsed = parseUrl(settings.url);
  const direct = redisOptionsFromUrl(parsed, settings.password, settings.tlsCa ?? process.env.GLIDEMQ_TLS_CA);
  if (parsed.sentinel) return createSentinelClient(settings, parsed, parsed.sentinel, direct, extra);
  const base = { socketTimeout: DEFAULT_SOCKET_TIMEOUT, ...direct, ...settings.options, ...extra };
  if (settings.cluster) {
    // A cluster has database 0 only: a URL naming another would silently mean database 0.
    if (parsed.db !== 0) throw invalid(`a Valkey cluster has only database 0, not ${parsed.db}: drop "/${parsed.db}" from the URL ${redactUrl(settings.url)}`);
    const clusterOpts: ClusterOptions = {
      redisOptions: (({ host: _h, port: _p, db: _d, retryStrategy: _r, ...rest }) => rest)(base),
      enableReadyCheck: true,
      // A caller's retry policy (the CLI gives up quickly) governs reconnecting to the whole cluster.
      ...(base.retryStrategy ? { clusterRetryStrategy: base.retryStrategy } : {}),
      // Room for a failover: commands on a dead primary's slots are retried (refreshing the slot map
      // each time) until its replica takes over, instead of failing after a few hundred ms.
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      retryDelayOnTryAgain: 200,
      maxRedirections: 32,
      // Notice a failover even while idle, so a promoted replica gets the library (library.ts
      // listens for 'refresh') before the next function call reaches it.
      slotsRefreshInterval: 5000,
      ...(parsed.tls ? { dnsLookup: (address, cb) => cb(null, address) } : {}),
    };
    const seed = { host: parsed.host, port: parsed.port };
    const cluster = new Cluster([seed, ...(seeds ?? []).filter((n) => n.host !== seed.host || n.port !== seed.port)], clusterOpts);
    // each node's connection does ioredis's ready check too (lazily: it connects after this),
    // the seed nodes made in the constructor and every node the slot map adds later
    cluster.nodes('all').forEach(readyCheckWithoutKeyspace);
    (cluster as unknown as { connectionPool?: { on(e: '+node', f: (node: Redis) => void): void } }).connectionPool?.on('+node', readyCheckWithoutKeyspace);
    rememberNodes(cluster, seed);
    seedLabels.set(cluster, `the cluster at ${host(seed)}`);
    return cluster;
  }
  const client = new Redis(base);
  readyCheckWithoutKeyspace(client);
  if (parsed.db !== 0) refuseMissingDatabase(client, parsed.db, host(parsed));
  return client;
}

/**
 * ioredis's ready check reads a bare INFO (every section, the keyspace of every database too),
 * which glidemq's roles do not allow (README "ACL roles": `+info|replication`, and ACL checks only
 * INFO's first argument). The check needs only `loading` (the persistence section), so this
 * client's asks `INFO replication persistence` instead. Other INFO calls are left as they are.
 */
export function readyCheckWithoutKeyspace(client: Redis): void {
  const info = client.info.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { info: (...args: unknown[]) => unknown }).info = (...args: unknown[]) =>
    args.length === 1 && typeof args[0] === 'function' ? info('replication', 'persistence', args[0]) : info(...args);
}

/**
 * A client that asks the sentinels where the primary is, and asks again after a failover. A caller's
 * retry policy (the CLI gives up quickly) also bounds the rounds over the sentinels: without it
 * ioredis would ask them forever before the first connection, and the policy would never be used.
 */
function createSentinelClient(settings: ClientSettings, parsed: ParsedUrl, target: SentinelTarget, direct: RedisOptions, extra: RedisOptions): Redis {
  if (settings.cluster) {
    throw invalid(`a Sentinel URL names a primary and its replicas, not a cluster: drop --cluster (or cluster: true) for ${redactUrl(settings.url)}`);
  }
  const { host: _h, port: _p, ...where } = direct;
  const given = { ...settings.options, ...extra };
  const options: RedisOptions = {
    socketTimeout: DEFAULT_SOCKET_TIMEOUT,
    ...where,
    ...sentinelClientOptions(target, direct.tls, given),
    ...given,
  };
  if (given.retryStrategy && !given.sentinelRetryStrategy) options.sentinelRetryStrategy = given.retryStrategy;
  const client = new Redis(options);
  readyCheckWithoutKeyspace(client);
  const label = sentinelLabel(target);
  watchSentinels(client, target);
  // ioredis closes the failover detector's sentinel subscriptions on disconnect() but not on quit():
  // they would keep reconnecting, and keep the process alive, after the client ended.
  client.on('end', () => (client as unknown as { connector?: { failoverDetector?: { cleanup(): void } | null } }).connector?.failoverDetector?.cleanup());
  if (parsed.db !== 0) refuseMissingDatabase(client, parsed.db, label);
  return client;
}

/** What each sentinel last said when asked for the primary (ioredis's `sentinelError` events). */
const sentinelAnswers = new WeakMap<Client, { target: SentinelTarget; bySentinel: Map<string, string> }>();

function watchSentinels(client: Redis, target: SentinelTarget): void {
  const bySentinel = new Map<string, string>();
  sentinelAnswers.set(client, { target, bySentinel });
  client.on('sentinelError', (err: Error) => {
    const said = parseSentinelError(err.message);
    if (said) bySentinel.set(said[0], said[1]);
  });
  // a primary found: what the sentinels said before is history
  client.on('ready', () => bySentinel.clear());
}

/** When `err` says no sentinel gave a primary: the error naming the sentinels, the master and why. */
function sentinelFailure(client: Client | undefined, err: Error): ConnectionError | undefined {
  const seen = client && sentinelAnswers.get(client);
  if (!seen || !/^All sentinels are unreachable/.test(String((err as Error | undefined)?.message))) return undefined;
  return new ConnectionError('ERR_SENTINEL', describeSentinelFailure(seen.target, seen.bySentinel));
}

/** Clients whose server refused their database number, and the error that says so. */
const refusedDatabases = new WeakMap<Client, ConnectionError>();

/**
 * A server without the URL's database answers SELECT with an error, and ioredis only reports it
 * and goes on in database 0: every command would read and write (and `obliterate` delete) another
 * database than the one named. The SELECT reply arrives during the connection handshake, before
 * any command of the caller is sent, so the client is closed right there: nothing reaches
 * database 0, and every command fails. waitReady(), settleTopology() and lastConnectionProblem()
 * then name the database (refusedDatabases). A reconnect that meets the same answer (a server
 * restarted with fewer databases) ends the client the same way.
 */
function refuseMissingDatabase(client: Redis, db: number, where: string): void {
  client.on('error', (err: Error) => {
    const refused = databaseRefusal(err, db, where);
    if (!refused) return;
    refusedDatabases.set(client, refused);
    client.disconnect();
  });
}

/** The error naming the database when `err` is the server's answer to SELECT `db`, else undefined. */
export function databaseRefusal(err: Error, db: number, where: string): ConnectionError | undefined {
  const cluster = /SELECT is not allowed in cluster mode/i.test(err.message);
  if (!cluster && !/DB index is out of range|invalid DB index/i.test(err.message)) return undefined;
  const why = cluster
    ? `the server ${where} is a cluster node, which has only database 0 (SELECT ${db}: ${err.message}): drop "/${db}" from the URL`
    : `the server ${where} has no database ${db} (SELECT ${db}: ${err.message}): use a database number the server has ` +
      '(below its "databases" setting, 16 by default), or none for database 0';
  return new ConnectionError('ERR_DATABASE', why);
}

/** The database refusal behind the last connection failure, if that was one (a CLI names it instead of "cannot reach"). */
export function lastDatabaseRefusal(): ConnectionError | undefined {
  return lastSocketError instanceof ConnectionError && lastSocketError.code === 'ERR_DATABASE' ? lastSocketError : undefined;
}

type Seed = { host: string; port: number };

const seedLabels = new WeakMap<Cluster, string>();
const host = (n: Seed) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`);

/** How messages name a cluster client: by the node its URL named, when glidemq made it. */
export function clusterLabel(c: Cluster): string {
  return seedLabels.get(c) ?? 'the cluster';
}

/** Every node a cluster client knows of (for seeding another client, or reconnecting). */
export function knownNodes(c: Cluster): Seed[] {
  return c.nodes('all').map((n) => ({ host: n.options.host ?? '127.0.0.1', port: n.options.port ?? 6379 }));
}

/**
 * ioredis reconnects a cluster client through its startup nodes only; with just the URL's node, a
 * client whose every connection dropped could never come back once that node is gone (a failed-over
 * primary). After each slot-map refresh the startup list becomes the URL's node plus every node seen.
 */
function rememberNodes(cluster: Cluster, seed: Seed): void {
  cluster.on('refresh', () => {
    const holder = cluster as unknown as { startupNodes?: unknown };
    if (!Array.isArray(holder.startupNodes)) return;
    const others = knownNodes(cluster).filter((n) => n.host !== seed.host || n.port !== seed.port);
    if (others.length > 0) holder.startupNodes = [seed, ...others];
  });
}

/**
 * The ioredis option names (versions 5 and 6, with the socket options they pass to `net`/`tls`) by
 * which a plain object is recognised as connection options.
 */
const OPTION_KEYS = new Set([
  // where and how to connect
  'host', 'port', 'path', 'family', 'tls', 'username', 'password', 'db', 'name', 'role', 'keyPrefix',
  'sentinels', 'sentinelUsername', 'sentinelPassword', 'sentinelTLS', 'sentinelRetryStrategy',
  'sentinelReconnectStrategy', 'sentinelCommandTimeout', 'sentinelMaxConnections', 'enableTLSForSentinelMode',
  'preferredSlaves', 'natMap', 'updateSentinels', 'failoverDetector', 'Connector', 'localAddress', 'localPort',
  // behaviour
  'connectTimeout', 'disconnectTimeout', 'commandTimeout', 'socketTimeout', 'blockingTimeout', 'blockingTimeoutGrace',
  'keepAlive', 'noDelay', 'connectionName', 'disableClientInfo', 'clientInfoTag', 'retryStrategy', 'reconnectOnError',
  'maxRetriesPerRequest', 'maxLoadingRetryTime', 'enableOfflineQueue', 'enableReadyCheck', 'autoResubscribe',
  'autoResendUnfulfilledCommands', 'lazyConnect', 'readOnly', 'stringNumbers', 'protocol', 'replyMapping', 'monitor',
  'enableAutoPipelining', 'autoPipeliningIgnoredCommands', 'offlineQueue', 'commandQueue', 'scripts',
  'showFriendlyErrorStack', 'himportFieldsets',
]);

/** The keys of glidemq's own `{ url, ... }` form (ClientSettings). */
const SETTINGS_KEYS = new Set(['url', 'cluster', 'password', 'tlsCa', 'options']);

/** What glidemq calls on a client it is given; a client of any ioredis major (5, 6) has them all. */
const CLIENT_METHODS = ['duplicate', 'call', 'fcall', 'sendCommand', 'connect', 'quit', 'disconnect', 'on', 'off'] as const;

/**
 * The members a client-like object lacks (empty: it is usable as a client). Recognised by shape, not
 * `instanceof`: a BullMQ application's ioredis 5 client is no instance of glidemq's ioredis 6 classes.
 * A cluster client (`isCluster: true`) also needs `nodes()`.
 */
function missingClientMembers(x: object): string[] {
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

/** A plain `{ ... }` object (of this or another realm), not an instance of some class. */
function isPlainObject(x: object): boolean {
  const proto = Object.getPrototypeOf(x) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

function describeValue(x: unknown): string {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'an array';
  if (typeof x !== 'object') return `a ${typeof x}`;
  const ctor = (Object.getPrototypeOf(x) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof ctor === 'string' && ctor !== '' && ctor !== 'Object' ? `a ${ctor} instance` : 'an object';
}

const EXPECTED =
  'expected a URL string, ioredis options ({ host, port, ... }), { url, cluster?, password?, tlsCa?, options? } or an ioredis client (version 5 or 6)';

function refused(what: string): InvalidArgumentError {
  return new InvalidArgumentError('ERR_CONNECTION_INPUT', `connection: ${what}; ${EXPECTED}`, true);
}

/**
 * Normalises any accepted connection input into settings that can make more clients. Something that
 * is none of the accepted forms is refused, never read as "no options": connecting to the default
 * address instead of the server the caller meant would hang, or write to whatever runs there.
 */
export function settingsFrom(input: ConnectionInput | undefined): ClientSettings | Client {
  if (input === undefined) return { url: process.env.GLIDEMQ_URL ?? DEFAULT_URL, cluster: false, password: process.env.GLIDEMQ_PASSWORD };
  if (typeof input === 'string') return { url: input, cluster: false, password: process.env.GLIDEMQ_PASSWORD };
  const given: unknown = input;
  if (given instanceof URL) return { url: given.href, cluster: false, password: process.env.GLIDEMQ_PASSWORD };
  if (typeof given !== 'object' || given === null || Array.isArray(given)) throw refused(`got ${describeValue(given)}`);
  if (isClient(given)) return given;
  if (!isPlainObject(given)) {
    const missing = missingClientMembers(given);
    const partly = missing.length < CLIENT_METHODS.length + 2;
    throw refused(
      partly
        ? `got ${describeValue(given)} that is not an ioredis client (it has no ${missing.join(', ')})`
        : `got ${describeValue(given)}`,
    );
  }
  const keys = Object.keys(given);
  if ('url' in given) {
    const unknown = keys.filter((k) => !SETTINGS_KEYS.has(k));
    if (typeof (given as { url?: unknown }).url !== 'string') throw refused('"url" is not a string');
    if (unknown.length > 0) throw refused(`unknown ${unknown.length === 1 ? 'key' : 'keys'} ${unknown.map((k) => `"${k}"`).join(', ')} beside "url"`);
    const withUrl = given as { url: string; cluster?: boolean; password?: string; tlsCa?: string; options?: RedisOptions };
    return {
      url: withUrl.url,
      cluster: !!withUrl.cluster,
      password: withUrl.password ?? process.env.GLIDEMQ_PASSWORD,
      tlsCa: withUrl.tlsCa,
      options: withUrl.options,
    };
  }
  // An empty object is "no options" (ioredis's own defaults, as `new Redis({})`); anything else must
  // name at least one ioredis option, so `{ foo: 1 }` or a wrapper object is not taken for one.
  if (keys.length > 0 && !keys.some((k) => OPTION_KEYS.has(k))) {
    throw refused(`got an object with no ioredis option (${keys.slice(0, 5).map((k) => `"${k}"`).join(', ')}${keys.length > 5 ? ', ...' : ''})`);
  }
  const o = given as RedisOptions;
  const scheme = o.tls ? 'rediss' : 'redis';
  return {
    // options naming sentinels are described (and duplicated) by the Sentinel URL of the same set
    url: sentinelUrlFromOptions(o) ?? `${scheme}://${o.host ?? '127.0.0.1'}:${o.port ?? 6379}/${o.db ?? 0}`,
    cluster: false,
    password: o.password,
    options: o,
  };
}

/**
 * Ends a closing Cluster client's periodic slot refresh for good. ioredis re-arms that timer from
 * the callback of every refresh, also of one in flight when the client closes (it answers "Cluster
 * is disconnected" and arms the next round, cluster/index.js nextRound): a closed client would
 * then keep a timer alive, and its process, forever. A closed client needs no slots: its refresh
 * becomes a no-op, so at most one armed round fires, once.
 */
export function stopSlotRefresh(c: Cluster): void {
  c.refreshSlotsCache = () => undefined;
  (c as unknown as { clearNodesRefreshInterval?: () => void }).clearNodesRefreshInterval?.();
}

/** Drops a client's connections at once (no QUIT), a Cluster's slot refresh with them. */
export function disconnectClient(c: Client): void {
  if (isCluster(c)) stopSlotRefresh(c);
  c.disconnect();
}

export function isCluster(c: Client): c is Cluster {
  // `isCluster` is ioredis's own flag (true on Cluster, false on Redis), set by versions 5 and 6 alike.
  return c instanceof Cluster || (c as { isCluster?: unknown }).isCluster === true;
}

/** Describes where a client points, without any password. */
export function describeSettings(s: ClientSettings): string {
  return redactUrl(s.url);
}

/** Waits until the client is ready, or fails with a one-line error naming the host. */
export async function waitReady(client: Client, label: string, timeoutMs = 5000): Promise<void> {
  if (client.status === 'ready') return;
  label = redactUrl(label); // a caller may name the server by its URL
  await new Promise<void>((resolve, reject) => {
    let lastError: string | undefined;
    let sentinelSaid: string | undefined;
    const fail = (what: string) => {
      cleanup();
      reject(new ConnectionError('ERR_CONNECTION', `cannot reach ${label}: ${what}${lastError ? ` (${explain(lastError)})` : ''}`));
    };
    const timer = setTimeout(() => fail(`no answer within ${timeoutMs} ms`), timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const onEnd = () => {
      if (sentinelSaid) {
        // the client gave up asking the sentinels: what they said is the whole story
        cleanup();
        return reject(new ConnectionError('ERR_SENTINEL', `cannot reach ${label}: ${sentinelSaid}`));
      }
      const refused = refusedDatabases.get(client);
      if (!refused) return fail('connection closed');
      cleanup();
      reject(refused);
    };
    // A cluster client says why in 'node error' (the node's own reply); a plain client in 'error'.
    const onError = (err: Error) => {
      const sentinel = sentinelFailure(client, err);
      if (sentinel) {
        lastError = sentinelSaid = sentinel.message;
        return;
      }
      const said = err.message.replace(/^Failed to refresh slots cache\.\s*/, '').trim();
      if (said && !/^Connection is closed/.test(said)) lastError = said;
    };
    const cleanup = () => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('end', onEnd);
      client.off('error', onError);
      client.off('node error', onError);
    };
    client.on('ready', onReady);
    client.on('end', onEnd);
    client.on('error', onError);
    client.on('node error', onError);
  });
}

function explain(message: string): string {
  if (/cluster support disabled/i.test(message)) return `${message}: the server is not a cluster node, run without --cluster`;
  return message;
}

export interface Acquired {
  /** Replaced by a Cluster client when settleTopology() finds the server is a cluster node. */
  client: Client;
  /** True when glidemq created the client and must close it. */
  owned: boolean;
  settings?: ClientSettings;
}

const settling = new WeakMap<Acquired, Promise<Client>>();

/**
 * Auto-detection: a client glidemq created in standalone mode asks its server `INFO cluster`
 * (falling back to `CLUSTER INFO` where INFO is disabled); a server that says it is a cluster node
 * gets a Cluster client instead, seeded from the same URL, and `a.client` / `a.settings` are
 * updated so later duplicates are cluster clients too. A client the caller passed in is left alone.
 */
export function settleTopology(a: Acquired): Promise<Client> {
  let p = settling.get(a);
  if (!p) {
    p = (async () => {
      const settings = a.settings;
      if (!a.owned || !settings || settings.cluster || isCluster(a.client)) return a.client;
      const standaloneClient = a.client;
      const clusterNode = await answersAsClusterNode(standaloneClient as Redis).catch((err: unknown) => {
        throw refusedDatabases.get(standaloneClient) ?? sentinelFailure(standaloneClient, err as Error) ?? err;
      });
      if (!clusterNode) return a.client;
      const standalone = a.client;
      a.settings = { ...settings, cluster: true };
      a.client = createClient(a.settings);
      a.client.on('error', rememberSocketError);
      standalone.disconnect();
      return a.client;
    })();
    settling.set(a, p);
    p.catch(() => settling.delete(a));
  }
  return p;
}

/**
 * True when the node says cluster_enabled:1. A server reply other than a refusal means standalone;
 * no reply at all (unreachable, not answering) is reported now, so a caller does not wait twice.
 */
async function answersAsClusterNode(c: Redis): Promise<boolean> {
  try {
    // (replication first: the roles may read INFO replication, and the sections named after it)
    return /cluster_enabled:1/.test(String(await c.call('INFO', 'replication', 'cluster')));
  } catch (err) {
    if (!(err instanceof ReplyError)) throw err;
    if (!isCommandRefused(err)) return false;
  }
  try {
    return /cluster_state:/.test(String(await c.call('CLUSTER', 'INFO')));
  } catch {
    return false;
  }
}

function isCommandRefused(err: unknown): boolean {
  return err instanceof Error && /unknown command|NOPERM|no permissions/i.test(err.message);
}

/** A `MOVED <slot> <host:port>` reply: a standalone client is talking to a cluster node. */
export function isMovedError(err: unknown): boolean {
  return err instanceof Error && /^MOVED \d+ /.test(err.message);
}

/**
 * The one server connection that commands on `key` travel over: the client itself, or for a cluster
 * the connection to the primary serving the key's slot (undefined until the slot map is known).
 * Connection-scoped commands (CLIENT ID before a blocking read) must go there.
 */
export function connectionFor(c: Client, key: string): Redis | undefined {
  return isCluster(c) ? nodeForKey(c, key) : c;
}

/** The client's connection to the same server as `like` (for CLIENT UNBLOCK of another client's read). */
export function sameServer(c: Client, like: Redis): Redis | undefined {
  if (!isCluster(c)) return c;
  return c.nodes('all').find((n) => n.options.host === like.options.host && n.options.port === like.options.port);
}

/** Cluster hash slot of a key (CRC16/XMODEM of the hash tag, or of the whole key, mod 16384). */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(key)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

/** The connection a cluster client uses for the primary that serves `key`'s slot, once slots are known. */
export function nodeForKey(c: Cluster, key: string): Redis | undefined {
  const owner = c.slots[keySlot(key)]?.[0];
  if (!owner) return undefined;
  return c.nodes('all').find((n) => `${n.options.host}:${n.options.port}` === owner);
}

let lastSocketError: Error | undefined;
/** Whether the client that reported lastSocketError connects over TLS. */
let lastSocketErrorTls = false;

/** An 'error' listener of every client glidemq makes (`this` is the client that reports). */
function rememberSocketError(this: Client | undefined, err: Error): void {
  lastSocketError = (this && refusedDatabases.get(this)) || sentinelFailure(this, err) || err;
  lastSocketErrorTls = !!this && !!(isCluster(this) ? this.options.redisOptions?.tls : (this as Redis).options?.tls);
}

/**
 * Why the connections glidemq made last failed (a refused connection, an untrusted certificate, a
 * rejected password), in one sentence, or undefined. A command that fails only with ioredis's
 * generic "Connection is closed" / "max retries" uses this to say what really went wrong.
 */
export function lastConnectionProblem(): string | undefined {
  const e = lastSocketError as (Error & { code?: string }) | undefined;
  if (!e) return undefined;
  if (e instanceof ConnectionError && (e.code === 'ERR_DATABASE' || e.code === 'ERR_SENTINEL')) return e.message;
  if (TLS_TRUST_CODES.has(e.code ?? '') || /certificate/i.test(e.message)) {
    return `the server's TLS certificate is not trusted (${e.message}); give the CA that signed it with --tls-ca <file> or $GLIDEMQ_TLS_CA`;
  }
  if (e.code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `the server's TLS certificate does not name this host (${e.message})`;
  if (/^WRONGPASS/.test(e.message)) return 'authentication failed: wrong user name or password';
  if (/^NOAUTH/.test(e.message)) return 'authentication failed: the server wants a password (in the URL or $GLIDEMQ_PASSWORD)';
  if (/wrong version number|packet length too long|unknown protocol/i.test(e.message)) {
    return `TLS handshake failed (${e.message}); is this a TLS port? rediss:// speaks TLS, redis:// does not`;
  }
  if (e.code === 'ECONNRESET') return 'the server closed the connection (ECONNRESET); a TLS-only port needs rediss://';
  if (e.code === 'ETIMEDOUT' && lastSocketErrorTls) {
    // a plain port reads a TLS hello as a command that never ends, and so never answers it
    return 'no TLS handshake within the connect timeout (ETIMEDOUT); the server there may not speak TLS (a plain port needs redis://)';
  }
  if (/Socket timeout/.test(e.message)) return `the server accepted the connection but did not answer (${e.message.replace(/\.$/, '')})`;
  if (e.code) return e.code;
  return undefined;
}

const TLS_TRUST_CODES = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
]);

/** Resolves a connection input into a client: a given instance is shared, anything else is created. */
export function acquireClient(input: ConnectionInput | undefined, extra: RedisOptions = {}): Acquired {
  const s = settingsFrom(input);
  if (isClient(s)) return { client: s, owned: false };
  const client = createClient(s, extra);
  // Errors surface on the commands that fail; an unhandled 'error' event must not kill the process.
  client.on('error', rememberSocketError);
  return { client, owned: true, settings: s };
}

/** How long the acquired connection waits for a reply before it counts as dead (see DEFAULT_SOCKET_TIMEOUT). */
export function socketTimeoutOf(a: Acquired): number {
  const fromSettings = a.settings?.options?.socketTimeout;
  if (a.settings) return fromSettings ?? DEFAULT_SOCKET_TIMEOUT;
  const own = isCluster(a.client) ? a.client.options.redisOptions?.socketTimeout : (a.client as Redis).options.socketTimeout;
  return own ?? DEFAULT_SOCKET_TIMEOUT;
}

/** A second connection like the first (for blocking reads), always owned by the caller. */
export function duplicateClient(a: Acquired, extra: RedisOptions = {}): Client {
  let c: Client;
  // A cluster duplicate is seeded with every node the first client knows: the URL's node may be down.
  if (a.settings) c = createClient(a.settings, extra, isCluster(a.client) ? knownNodes(a.client) : undefined);
  else if (isCluster(a.client)) c = a.client.duplicate();
  else c = (a.client as Redis).duplicate(extra);
  c.on('error', rememberSocketError);
  return c;
}

/** QUIT, or a plain disconnect when the server does not answer soon (a cluster still reconnecting). */
export async function closeClient(c: Client, graceMs = 2000): Promise<void> {
  if (isCluster(c)) stopSlotRefresh(c);
  let timer: NodeJS.Timeout | undefined;
  try {
    const gaveUp = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), graceMs)));
    const quit = c.quit();
    quit.catch(() => undefined); // settled by the disconnect below when it times out
    if ((await Promise.race([quit, gaveUp])) === 'timeout') c.disconnect();
  } catch {
    c.disconnect();
  } finally {
    clearTimeout(timer);
  }
}
