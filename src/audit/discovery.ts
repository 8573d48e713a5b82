/**
 * Which nodes to audit and how to reach each one directly: the server itself when standalone;
 * every primary and replica from CLUSTER NODES when it is a cluster node (asked for with
 * --cluster, or noticed from INFO cluster).
 */
import { Redis, type RedisOptions } from 'ioredis';
import { type ClientSettings, databaseRefusal, parseUrl, readyCheckWithoutKeyspace, redactUrl, redisOptionsFromUrl } from '../engine/connecting/connection.js';
import { ConnectionError } from '../engine/shared/errors.js';
import type { NodeRole } from './types.js';

export interface ClusterNode {
  host: string;
  port: number;
  role: NodeRole;
  /** Flags such as `fail` or `noaddr` that say the node is known to be down. */
  flags: string[];
}

/** One CLUSTER NODES line: `<id> <ip:port@cport[,hostname]> <flags> <master> ...`. */
export function parseClusterNodes(text: string, seedHost: string): ClusterNode[] {
  const nodes: ClusterNode[] = [];
  for (const line of text.split(/\r?\n/)) {
    const fields = line.trim().split(' ');
    if (fields.length < 3) continue;
    const endpoint = fields[1].split('@')[0];
    const colon = endpoint.lastIndexOf(':');
    const port = Number(endpoint.slice(colon + 1));
    const host = endpoint.slice(0, colon).replace(/^\[|\]$/g, '') || seedHost;
    const flags = fields[2].split(',');
    if (!port || flags.includes('handshake')) continue;
    nodes.push({ host, port, role: flags.includes('slave') ? 'replica' : 'master', flags });
  }
  return nodes;
}

export function formatAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * A client for exactly one node, without cluster redirection or endless retries: an audit
 * reports what it cannot reach instead of waiting for it.
 */
export async function connectNode(settings: ClientSettings, host?: string, port?: number): Promise<Redis> {
  const parsed = parseUrl(settings.url);
  const options: RedisOptions = {
    ...redisOptionsFromUrl(parsed, settings.password, settings.tlsCa ?? process.env.GLIDEMQ_TLS_CA),
    ...settings.options,
    host: host ?? parsed.host,
    port: port ?? parsed.port,
    db: host === undefined ? parsed.db : 0,
    lazyConnect: true,
    connectTimeout: settings.options?.connectTimeout ?? 3000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  };
  const client = new Redis(options);
  readyCheckWithoutKeyspace(client);
  // Failures surface through connect() and each command; keep the socket's own error for the message.
  let socketError: (Error & { code?: string }) | undefined;
  client.on('error', (err: Error) => {
    socketError ??= err;
  });
  const label = host === undefined ? redactUrl(settings.url) : formatAddress(options.host!, options.port!);
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    const e = socketError ?? (err as Error & { code?: string });
    throw new ConnectionError('ERR_CONNECTION', describeConnectFailure(label, e));
  }
  // ioredis answers a refused SELECT by staying in database 0: a URL naming a database the
  // server does not have is refused here as everywhere (engine/connecting/connection.ts).
  const refused = socketError && databaseRefusal(socketError, options.db ?? 0, label);
  if (refused) {
    client.disconnect();
    throw refused;
  }
  return client;
}

function describeConnectFailure(label: string, e: Error & { code?: string }): string {
  if (/^NOAUTH/.test(e.message)) return `authentication failed at ${label}: the server wants a password (in the URL or $GLIDEMQ_PASSWORD)`;
  if (/^WRONGPASS/.test(e.message)) return `authentication failed at ${label}: wrong user name or password`;
  if (/RESP type|Protocol error/i.test(e.message)) return `cannot reach ${label}: it does not answer like a Valkey server`;
  return `cannot reach ${label}: ${e.code ?? e.message.replace(/\.$/, '')}`;
}

/** From INFO cluster; undefined when the server would not say. */
export async function isClusterNode(client: Redis): Promise<boolean | undefined> {
  try {
    const info = String(await client.call('INFO', 'cluster'));
    return /cluster_enabled:1/.test(info);
  } catch {
    return undefined;
  }
}

export async function clusterNodes(client: Redis, seedHost: string): Promise<ClusterNode[]> {
  return parseClusterNodes(String(await client.call('CLUSTER', 'NODES')), seedHost);
}
