/**
 * Making, readying and closing the ioredis clients glidemq uses (standalone, through Sentinel, or
 * cluster) from what a caller gave; a standalone URL that turns out to name a cluster node becomes a
 * cluster client. The parts live beside it: server-url.ts (URLs), connection-input.ts (what a caller
 * may give), client-shape.ts (what counts as a client), cluster-nodes.ts, connection-problems.ts.
 */
import { Redis, Cluster, ReplyError, type RedisOptions, type ClusterOptions } from 'ioredis';
import { isClient, isCluster, type Client } from './client-shape.js';
import { hostLabel, knownNodes, nameCluster, rememberNodes, stopSlotRefresh, type Seed } from './cluster-nodes.js';
import { settingsFrom, type ClientSettings, type ConnectionInput } from './connection-input.js';
import { nameForeignServer, refuseMissingDatabase, refusedDatabaseOf, rememberSocketError, sentinelFailure, watchSentinels } from './connection-problems.js';
import { ConnectionError, invalid } from '../shared/errors.js';
import { sentinelClientOptions, sentinelLabel, type SentinelTarget } from './sentinel.js';
import { parseUrl, redactUrl, redisOptionsFromUrl, type ParsedUrl } from './server-url.js';

// The parts of connecting live in their own files; importers of this module still find them here.
export * from './client-shape.js';
export * from './cluster-nodes.js';
export * from './connection-input.js';
export { databaseRefusal, lastConnectionProblem, lastDatabaseRefusal, probeForeignServer } from './connection-problems.js';
export * from './server-url.js';

/**
 * A connection that has commands outstanding but receives nothing for this long is treated as
 * dead (a partition, a hung server, a connection a middlebox forgot) and is reconnected; its
 * unanswered commands are sent again on the new connection. Blocking reads add their own block
 * time on top. Override with the ioredis option `socketTimeout`.
 */
export const DEFAULT_SOCKET_TIMEOUT = 15_000;

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
    nameCluster(cluster, seed);
    return cluster;
  }
  const client = new Redis(base);
  readyCheckWithoutKeyspace(client);
  nameForeignServer(client, hostLabel(parsed));
  if (parsed.db !== 0) refuseMissingDatabase(client, parsed.db, hostLabel(parsed));
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

/** Drops a client's connections at once (no QUIT), a Cluster's slot refresh with them. */
export function disconnectClient(c: Client): void {
  if (isCluster(c)) stopSlotRefresh(c);
  c.disconnect();
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
      const refused = refusedDatabaseOf(client);
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
        throw refusedDatabaseOf(standaloneClient) ?? sentinelFailure(standaloneClient, err as Error) ?? err;
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
