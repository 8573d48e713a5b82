/** Finds the queues under a prefix: a SCAN for their meta keys, on every primary of a cluster. */
import type { Redis } from 'ioredis';
import { type Client, clusterLabel, isCluster, waitReady } from './connection.js';
import { queueFromKey } from '../shared/keys.js';

/**
 * `text` as a SCAN MATCH pattern that matches only itself: the glob characters `*`, `?`, `[`, `]`
 * and `\` each get a backslash. (A prefix such as `a\b*[x]` would otherwise match other keys, or
 * not its own.)
 */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** The SCAN pattern of the meta keys of every queue under `prefix`. */
export function queueMetaPattern(prefix: string): string {
  return `${globEscape(prefix)}:{*}:meta`;
}

async function scanNode(node: Redis, pattern: string, found: Set<string>, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const q = queueFromKey(prefix, key);
      if (q) found.add(q);
    }
  } while (cursor !== '0');
}

/** Queue names under `prefix`, sorted. A queue exists once it has a meta hash (first add, pause or worker). */
export async function listQueues(client: Client, prefix: string): Promise<string[]> {
  const found = new Set<string>();
  // A cluster client knows its primaries only once the slot map is loaded.
  if (isCluster(client) && client.status !== 'ready') await waitReady(client, clusterLabel(client), 15000);
  const nodes = isCluster(client) ? client.nodes('master') : [client as Redis];
  await Promise.all(nodes.map((n) => scanNode(n, queueMetaPattern(prefix), found, prefix)));
  return [...found].sort();
}
