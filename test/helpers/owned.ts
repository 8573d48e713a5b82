/**
 * For tests that start their own servers (restarts, power cuts): what a test made, closed after
 * each test in the order that leaves no client reconnecting to a stopped server — queues, then raw
 * clients, then the servers.
 */
import type { Redis } from 'ioredis';
import type { Queue } from '../../src/engine/queue/queue.js';
import type { TestServer } from './valkey.js';

export interface Owned {
  servers: TestServer[];
  queues: Queue[];
  clients: Redis[];
}

/** Call at the top of a describe; push what each test makes onto the returned lists. */
export function ownedPerTest(): Owned {
  const owned: Owned = { servers: [], queues: [], clients: [] };
  afterEach(async () => {
    await Promise.all(owned.queues.splice(0).map((q) => q.close()));
    owned.clients.splice(0).forEach((c) => c.disconnect());
    await Promise.all(owned.servers.splice(0).map((s) => s.stop()));
  });
  return owned;
}
