/**
 * A cluster client's nodes and slots: how messages name it, the nodes it has seen (it reconnects
 * through them), the node serving a key, and ending its slot refresh when it closes.
 */
import type { Cluster, Redis } from 'ioredis';
import { isCluster, type Client } from './client-shape.js';

export type Seed = { host: string; port: number };

const seedLabels = new WeakMap<Cluster, string>();
/** A node as messages name it: host:port, an IPv6 host in brackets. */
export const hostLabel = (n: Seed) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`);

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
export function rememberNodes(cluster: Cluster, seed: Seed): void {
  cluster.on('refresh', () => {
    const holder = cluster as unknown as { startupNodes?: unknown };
    if (!Array.isArray(holder.startupNodes)) return;
    const others = knownNodes(cluster).filter((n) => n.host !== seed.host || n.port !== seed.port);
    if (others.length > 0) holder.startupNodes = [seed, ...others];
  });
}

/** Remembers how messages name a cluster client glidemq made: by its URL's node. */
export function nameCluster(cluster: Cluster, seed: Seed): void {
  seedLabels.set(cluster, `the cluster at ${hostLabel(seed)}`);
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
