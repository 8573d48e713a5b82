/**
 * A worker's second connection, the one that blocks: XREADGROUP over the job stream and the wake
 * stream while slots are free, XREAD of the events stream while the queue is paused. It knows its
 * own CLIENT ID on the node that serves the queue, so close() can CLIENT UNBLOCK it cleanly.
 */
import type { Redis } from 'ioredis';
import {
  connectionFor, duplicateClient, isCluster, sameServer, socketTimeoutOf, waitReady, type Acquired, type Client,
} from './connection.js';
import { CONSUMER_GROUP, type QueueKeys } from './keys.js';

export interface Delivery {
  /** Pairs (entry id, job id) from the job stream. */
  streamPairs: string[];
  /** Entry ids from the wake stream. */
  wakeIds: string[];
}

export class BlockingReader {
  readonly client: Client;
  private id: number | undefined;
  private conn: Redis | undefined;
  private blocked = false;

  constructor(
    acquired: Acquired,
    private readonly keys: QueueKeys,
    private readonly consumer: string,
    private readonly blockTimeout: number,
  ) {
    // A blocking read is silent for up to blockTimeout by design; only silence beyond that is a dead link.
    this.client = duplicateClient(acquired, { maxRetriesPerRequest: null, socketTimeout: blockTimeout + socketTimeoutOf(acquired) });
    this.client.on('ready', () => void this.learnId());
  }

  async start(): Promise<void> {
    if (isCluster(this.client)) await waitReady(this.client, 'the cluster', 15000);
    await this.learnId();
  }

  private async learnId(): Promise<void> {
    try {
      const conn = connectionFor(this.client, this.keys.stream);
      if (!conn) return;
      this.id = (await conn.client('ID')) as number;
      this.conn = conn;
    } catch {
      /* reconnecting; the next ready event tries again */
    }
  }

  /** Waits up to blockTimeout for up to `count` new entries; undefined when none came. */
  async read(count: number): Promise<Delivery | undefined> {
    if (isCluster(this.client) && connectionFor(this.client, this.keys.stream) !== this.conn) {
      await this.learnId(); // the queue's slot moved (failover): the read runs on another node
    }
    this.blocked = true;
    let delivered: [string, [string, string[]][]][] | null;
    try {
      delivered = (await (this.client as Redis).xreadgroup(
        'GROUP', CONSUMER_GROUP, this.consumer, 'COUNT', count, 'BLOCK', this.blockTimeout,
        'STREAMS', this.keys.stream, this.keys.wake, '>', '>',
      )) as [string, [string, string[]][]][] | null;
    } finally {
      this.blocked = false;
    }
    if (!delivered) return undefined;
    const out: Delivery = { streamPairs: [], wakeIds: [] };
    for (const [key, entries] of delivered) {
      for (const [sid, fields] of entries) {
        if (key === this.keys.stream) out.streamPairs.push(sid, fields?.[1] ?? '');
        else out.wakeIds.push(sid);
      }
    }
    return out;
  }

  /** Blocks on the events stream until an event after `after` (e.g. resumed), or maxMs. */
  async waitForEvent(maxMs: number, after = '$'): Promise<void> {
    try {
      await (this.client as Redis).xread('BLOCK', maxMs, 'STREAMS', this.keys.events, after);
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Ends a read in progress as if it timed out (from the worker's command connection). */
  async unblock(from: Client): Promise<void> {
    const server = this.conn && sameServer(from, this.conn);
    if (this.id !== undefined && this.blocked && server) await server.client('UNBLOCK', this.id).catch(() => undefined);
  }

  close(): void {
    this.client.disconnect();
  }
}
