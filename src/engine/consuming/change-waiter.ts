/**
 * How a worker on a queue with a globalConcurrency limit waits without spinning. Such a worker
 * takes jobs only through glidemq_fetch / glidemq_finish (which check the limit in the same call),
 * so when a fetch brings nothing it must learn when trying again is worthwhile: a job finished (a
 * slot may be free), a job was added, promoted, redispatched or handed back, or the queue was
 * resumed. It marks the tails of the events, job and wake streams BEFORE the fetch, then blocks on
 * a plain XREAD (no consumer group: it claims nothing) from those marks, so nothing that happens
 * after the fetch is missed and nothing that happened before it wakes it.
 */
import type { Redis } from 'ioredis';
import type { Client } from '../connecting/connection.js';
import type { QueueKeys } from '../shared/keys.js';

export class ChangeWaiter {
  private marks: string[] | undefined;

  constructor(private readonly keys: QueueKeys) {}

  /** Records where the streams end now (kept until reset: repeated waits continue from there). */
  async mark(client: Client): Promise<void> {
    if (this.marks) return;
    const k = this.keys;
    this.marks = await Promise.all(
      [k.events, k.stream, k.wake].map(async (key) => {
        const last = (await client.xrevrange(key, '+', '-', 'COUNT', 1)) as [string, string[]][];
        return last[0]?.[0] ?? '0-0';
      }),
    );
  }

  reset(): void {
    this.marks = undefined;
  }

  /**
   * Blocks on `blocker` (a connection free for blocking reads) until something past the marks can
   * change what a fetch returns, for at most `maxMs`. Progress events do not count.
   */
  async wait(blocker: Client, maxMs: number, stillWanted: () => boolean): Promise<void> {
    const k = this.keys;
    const deadline = Date.now() + maxMs;
    while (this.marks && stillWanted()) {
      const left = deadline - Date.now();
      if (left <= 0) return;
      const r = (await (blocker as Redis).xread(
        'COUNT', 100, 'BLOCK', left, 'STREAMS', k.events, k.stream, k.wake, ...this.marks,
      )) as [string, [string, string[]][]][] | null;
      if (!r || !this.marks) return;
      let relevant = false;
      for (const [key, entries] of r) {
        const i = key === k.events ? 0 : key === k.stream ? 1 : 2;
        this.marks[i] = entries[entries.length - 1][0];
        relevant ||= i > 0 || entries.some(([, f]) => f[1] !== 'progress');
      }
      if (relevant) return;
    }
  }
}
