/**
 * The connection a worker blocks on (XREADGROUP, XREAD), shared by the queue Worker (through
 * BlockingReader) and the BroadcastWorker. It is a duplicate of the worker's client whose socket
 * timeout allows a whole blocking read, and it knows its own CLIENT ID on the node serving its
 * key, so the worker can end a read early (CLIENT UNBLOCK from its command connection) when it
 * has something else to do or closes.
 */
import type { Redis } from 'ioredis';
import {
  connectionFor, disconnectClient, duplicateClient, isCluster, sameServer, socketTimeoutOf, waitReady, type Acquired, type Client,
} from './connection.js';

export class BlockingConnection {
  readonly client: Client;
  private id: number | undefined;
  private conn: Redis | undefined;
  private blocked = false;

  /** `routingKey`: a key of the stream read (in a cluster, the node that serves it is the one read). */
  constructor(acquired: Acquired, private readonly routingKey: string, blockTimeout: number) {
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
      const conn = connectionFor(this.client, this.routingKey);
      if (!conn) return;
      this.id = (await conn.client('ID')) as number;
      this.conn = conn;
    } catch {
      /* reconnecting; the next ready event tries again */
    }
  }

  /** Runs one blocking command on the connection, marked as blocked while it waits. */
  async block<T>(read: (client: Redis) => Promise<T>): Promise<T> {
    if (isCluster(this.client) && connectionFor(this.client, this.routingKey) !== this.conn) {
      await this.learnId(); // the key's slot moved (failover): the read runs on another node
    }
    this.blocked = true;
    try {
      return await read(this.client as Redis);
    } finally {
      this.blocked = false;
    }
  }

  /** Ends a read in progress as if it timed out (sent from `from`, the worker's command connection). */
  async unblock(from: Client): Promise<void> {
    const server = this.conn && sameServer(from, this.conn);
    if (this.id !== undefined && this.blocked && server) await server.client('UNBLOCK', this.id).catch(() => undefined);
  }

  close(): void {
    disconnectClient(this.client);
  }
}
