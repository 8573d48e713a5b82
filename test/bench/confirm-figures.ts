/**
 * The confirmed-writes rows (issue 31, README "Durability"): glidemq against itself, so each row's
 * "BullMQ" column holds glidemq unconfirmed on appendfsync everysec (the usual setting) in the same
 * round. Adds one at a time (awaited: what one producer waits for each add) and processing at c=10:
 * - unconfirmed on appendfsync always (every write fsynced before its reply);
 * - confirm { fsync: true } on appendfsync always (glidemq refuses confirm.fsync under everysec on
 *   Valkey, whose WAITAOF acknowledges before the fsync there: test/load/confirm-chaos.test.ts);
 * - confirm { replicas: 1 } on appendfsync everysec, with a replica on the same machine.
 */
import type { Redis } from 'ioredis';
import { Queue, Worker } from '../../src/index.js';
import type { ConfirmOptions } from '../../src/engine/producing/confirm.js';
import { TestServer, waitFor } from '../helpers/valkey.js';
import { preload, processBacklog, serialAdds, type Sizes } from './figures.js';
import { glidemq, type System } from './systems.js';

/** The rows: key, server, confirm. */
export const CONFIRM_ROWS = [
  { key: 'confirm.add.always', kind: 'add', server: 'always', confirm: undefined },
  { key: 'confirm.add.fsync', kind: 'add', server: 'always', confirm: { fsync: true } },
  { key: 'confirm.add.repl', kind: 'add', server: 'everysec', confirm: { replicas: 1 } },
  { key: 'confirm.proc.always', kind: 'proc', server: 'always', confirm: undefined },
  { key: 'confirm.proc.fsync', kind: 'proc', server: 'always', confirm: { fsync: true } },
  { key: 'confirm.proc.repl', kind: 'proc', server: 'everysec', confirm: { replicas: 1 } },
] as const;

/** glidemq with `confirm` on its adds and on its worker's finishes. */
function confirmSide(confirm: ConfirmOptions | undefined): System {
  if (!confirm) return glidemq;
  return {
    ...glidemq,
    async producer(url, queue) {
      const q = new Queue(queue, { connection: url, confirm });
      await q.waitUntilReady();
      return { addOne: (j) => q.add(j.name, j.data, j.opts), addBulk: (jobs) => q.addBulk(jobs), close: () => q.close() };
    },
    async worker(url, queue, concurrency, onCompleted) {
      const w = new Worker(queue, async () => null, { connection: url, concurrency, autorun: false, confirm });
      w.on('completed', (job) => onCompleted(job.data));
      w.on('error', (err) => console.error(`glidemq confirmed worker error: ${String(err)}`));
      w.run().catch(() => undefined); // settles at close
      await w.waitUntilReady();
      return { close: () => w.close() };
    },
  };
}

/** The servers of the rows: an everysec primary with a local replica, and an always server. */
export interface ConfirmServers {
  everysec: { s: TestServer; admin: Redis };
  always: { s: TestServer; admin: Redis };
  replica: TestServer;
}

export async function startConfirmServers(server: (p: 'aof-everysec' | 'aof-always') => Promise<{ s: TestServer; admin: Redis }>): Promise<ConfirmServers> {
  const everysec = await server('aof-everysec');
  const always = await server('aof-always');
  const replica = await new TestServer({ persistence: 'aof-everysec' }).start();
  const rc = replica.client();
  try {
    await rc.replicaof('127.0.0.1', everysec.s.port);
    await waitFor(async () => /master_link_status:up/.test(await rc.info('replication')), 'the bench replica to sync', 30000);
  } finally {
    rc.disconnect();
  }
  return { everysec, always, replica };
}

/** Small sizes: six rows and their baselines run every round. */
function rowSizes(s: Sizes): Sizes {
  return { ...s, serialMs: Math.min(s.serialMs, 500), backlog: Math.min(s.sideBacklog, 3000), processMaxMs: Math.min(s.sideMaxMs, 1000) };
}

/** One row's figure (jobs/s) on a flushed server. */
async function figure(kind: 'add' | 'proc', sys: System, srv: { s: TestServer; admin: Redis }, s: Sizes): Promise<number> {
  await srv.admin.flushall('SYNC');
  if (kind === 'add') return serialAdds(sys, srv.s.url, s);
  await preload(glidemq, srv.s.url, s.backlog);
  return (await processBacklog(sys, srv.s.url, 10, s)).rate;
}

/**
 * Every wanted row's figure and, once per kind, the baseline (unconfirmed on everysec): calls
 * `put(key, confirmed, baseline)` per row.
 */
export async function confirmFigures(
  servers: ConfirmServers,
  sizes: Sizes,
  wanted: (key: string) => boolean,
  put: (key: string, value: number, baseline: number) => void,
): Promise<void> {
  const s = rowSizes(sizes);
  const baseline = new Map<string, number>();
  for (const row of CONFIRM_ROWS) {
    if (!wanted(row.key)) continue;
    if (!baseline.has(row.kind)) baseline.set(row.kind, await figure(row.kind, glidemq, servers.everysec, s));
    const srv = row.server === 'always' ? servers.always : servers.everysec;
    put(row.key, await figure(row.kind, confirmSide(row.confirm), srv, s), baseline.get(row.kind)!);
  }
}
