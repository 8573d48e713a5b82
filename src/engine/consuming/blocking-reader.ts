/**
 * A worker's second connection, the one that blocks: XREADGROUP over the job stream and the wake
 * stream while slots are free, XREAD of the events stream while the queue is paused, on a
 * BlockingConnection (which the worker can CLIENT UNBLOCK to end a read early).
 */
import type { Acquired, Client } from '../connecting/connection.js';
import { BlockingConnection } from '../connecting/blocking-connection.js';
import { CONSUMER_GROUP, type QueueKeys } from '../shared/keys.js';

export interface Delivery {
  /** Pairs (entry id, job id) from the job stream. */
  streamPairs: string[];
  /** Entry ids from the wake stream. */
  wakeIds: string[];
  /** The least ms until a delayed job is due, from wake entries that carry one (scheduleDue). */
  dueIn?: number;
}

export class BlockingReader {
  private readonly conn: BlockingConnection;

  constructor(
    acquired: Acquired,
    private readonly keys: QueueKeys,
    private readonly consumer: string,
    private readonly blockTimeout: number,
  ) {
    this.conn = new BlockingConnection(acquired, keys.stream, blockTimeout);
  }

  get client(): Client {
    return this.conn.client;
  }

  start(): Promise<void> {
    return this.conn.start();
  }

  /** Waits up to blockTimeout for up to `count` new entries; undefined when none came. */
  async read(count: number): Promise<Delivery | undefined> {
    const delivered = (await this.conn.block((c) =>
      c.xreadgroup(
        'GROUP', CONSUMER_GROUP, this.consumer, 'COUNT', count, 'BLOCK', this.blockTimeout,
        'STREAMS', this.keys.stream, this.keys.wake, '>', '>',
      ),
    )) as [string, [string, string[]][]][] | null;
    if (!delivered) return undefined;
    const out: Delivery = { streamPairs: [], wakeIds: [] };
    for (const [key, entries] of delivered) {
      for (const [sid, fields] of entries) {
        if (key === this.keys.stream) out.streamPairs.push(sid, fields?.[1] ?? '');
        else {
          out.wakeIds.push(sid);
          if (fields?.[0] === 'due') out.dueIn = Math.min(out.dueIn ?? Infinity, Number(fields[1]));
        }
      }
    }
    return out;
  }

  /** Blocks on the events stream until an event after `after` (e.g. resumed), or maxMs. */
  async waitForEvent(maxMs: number, after = '$'): Promise<void> {
    try {
      await this.conn.block((c) => c.xread('BLOCK', maxMs, 'STREAMS', this.keys.events, after));
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Ends a read in progress as if it timed out (from the worker's command connection). */
  unblock(from: Client): Promise<void> {
    return this.conn.unblock(from);
  }

  close(): void {
    this.conn.close();
  }
}
