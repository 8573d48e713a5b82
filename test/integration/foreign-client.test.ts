/**
 * A client from another ioredis major is used or refused, never replaced: an ioredis 5 instance (what
 * every BullMQ application holds) passed as `connection` carries the jobs to its own server, and
 * every socket glidemq opens goes there, none to the default 127.0.0.1:6379. Something that is
 * neither a URL, ioredis options, glidemq's `{ url }` form nor a client is refused with a typed
 * error before any connection is made.
 */
import net from 'node:net';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker } from '../../src/engine/broadcast/broadcast-worker.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { type ConnectionInput, isClient, isCluster, settingsFrom } from '../../src/engine/connecting/connection.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';

/** Every TCP connection this process opens while `body` runs, as `host:port`. */
async function connectionsDuring<T>(body: () => Promise<T>): Promise<{ result: T; opened: string[] }> {
  const opened: string[] = [];
  const original = net.createConnection;
  const spy = ((...args: unknown[]) => {
    const o = args[0];
    if (typeof o === 'object' && o !== null) {
      const { host, port } = o as { host?: string; port?: number };
      opened.push(`${host ?? 'localhost'}:${port}`);
    } else opened.push(`localhost:${String(o)}`);
    return (original as (...a: unknown[]) => net.Socket)(...args);
  }) as typeof net.createConnection;
  net.createConnection = spy;
  try {
    return { result: await body(), opened };
  } finally {
    net.createConnection = original;
  }
}

describe('a client from another ioredis major (ioredis 5)', function () {
  this.timeout(30000);
  const server = useServer();
  let admin: Redis;
  const foreign: Redis5[] = [];

  before(() => {
    admin = server().client();
  });
  after(async () => {
    admin.disconnect();
  });
  afterEach(async () => {
    await Promise.all(foreign.splice(0).map((c) => c.quit().catch(() => c.disconnect())));
  });

  function client5(name: string): Redis5 {
    const c = new Redis5({ host: '127.0.0.1', port: server().port, connectionName: name, maxRetriesPerRequest: null });
    c.on('error', () => undefined);
    foreign.push(c);
    return c;
  }

  /** The names of the connections the test server has open now. */
  async function connectedNames(): Promise<string[]> {
    const list = String(await admin.call('CLIENT', 'LIST'));
    return list.split('\n').map((l) => /\bname=(\S*)/.exec(l)?.[1] ?? '').filter((n) => n !== '');
  }

  it('is recognised as a client by its shape, not taken for options', () => {
    const c = client5('shape-check');
    expect(isClient(c)).to.equal(true);
    expect(isCluster(c as unknown as Parameters<typeof isCluster>[0])).to.equal(false);
  });

  it('Queue and Worker given an ioredis 5 client add and process jobs on its server, and connect nowhere else', async () => {
    const name = uniqueQueue('v5');
    const producer = client5('glidemq-v5-producer');
    const consumer = client5('glidemq-v5-worker');
    const { opened } = await connectionsDuring(async () => {
      const queue = new Queue(name, { connection: producer });
      const worker = new Worker(name, async (job) => ({ doubled: (job.data as { n: number }).n * 2 }), {
        connection: consumer,
        blockTimeout: 500,
      });
      worker.on('error', () => undefined);
      try {
        await queue.waitUntilReady();
        expect(queue.client, 'the Queue uses the given client itself').to.equal(producer);
        const ids: string[] = [];
        for (let n = 1; n <= 5; n++) ids.push((await queue.add('double', { n })).id);
        await waitFor(async () => (await queue.getJobCounts()).completed === 5, 'the worker to complete all 5 jobs');
        expect(worker.finished).to.deep.equal({ completed: 5, failed: 0 });
        // the jobs live on the test server, where the client points
        const keys = (await admin.keys(`glide:{${name}}:*`)).sort();
        expect(keys).to.include(`glide:{${name}}:completed`);
        expect(Number(await admin.zcard(`glide:{${name}}:completed`))).to.equal(5);
        for (const id of ids) expect(await admin.exists(`glide:{${name}}:job:${id}`), `job ${id} on the test server`).to.equal(1);
        // while the worker runs: the given clients and the worker's blocking duplicate (same name) are here
        const names = await connectedNames();
        expect(names.filter((n) => n === 'glidemq-v5-producer')).to.have.length(1);
        expect(names.filter((n) => n === 'glidemq-v5-worker').length, names.join(',')).to.be.at.least(2);
      } finally {
        await worker.close();
        await queue.close();
      }
      // the caller's clients are the caller's: glidemq does not close them
      expect(producer.status).to.equal('ready');
      expect(consumer.status).to.equal('ready');
    });
    const elsewhere = opened.filter((a) => a !== `127.0.0.1:${server().port}`);
    expect(elsewhere, 'connections to anywhere but the test server').to.deep.equal([]);
    expect(opened.length, 'the worker opened its blocking connection through the client').to.be.at.least(1);
  });

  it('Broadcast and BroadcastWorker given an ioredis 5 client deliver on its server', async () => {
    const name = uniqueQueue('v5bc');
    const { opened } = await connectionsDuring(async () => {
      const b = new Broadcast(name, { connection: client5('glidemq-v5-bc') });
      const seen: number[] = [];
      const w = new BroadcastWorker(name, 'audit', async (m) => void seen.push((m.data as { i: number }).i), {
        connection: client5('glidemq-v5-bcw'),
        startFrom: 'earliest',
        blockTimeout: 500,
      });
      w.on('error', () => undefined);
      try {
        for (let i = 0; i < 3; i++) await b.publish('orders.created', { i });
        await waitFor(() => seen.length === 3, 'the broadcast worker to see all 3 messages');
        expect(seen.sort()).to.deep.equal([0, 1, 2]);
        expect(await b.length()).to.equal(3);
      } finally {
        await w.close(true);
        await b.close();
      }
    });
    expect(opened.filter((a) => a !== `127.0.0.1:${server().port}`)).to.deep.equal([]);
  });

  it('something that is neither options nor a client is refused with a typed error, before any connection', async () => {
    class Settings {
      host = '127.0.0.1';
      port = server().port;
    }
    const notClients: [unknown, RegExp][] = [
      [{ foo: 1 }, /no ioredis option \("foo"\)/],
      [new Settings(), /a Settings instance/],
      [new Map([['host', '127.0.0.1']]), /a Map instance/],
      [{ duplicate: () => undefined, sendCommand: () => undefined, options: {} }, /no ioredis option/],
      [Object.assign(Object.create({ sendCommand() {}, duplicate() {} }) as object, { options: {} }), /not an ioredis client \(it has no call, fcall/],
      [{ url: 42 }, /"url" is not a string/],
      [{ url: server().url, host: 'elsewhere' }, /unknown key "host" beside "url"/],
      [null, /got null/],
      [42, /got a number/],
      [['redis://127.0.0.1:1'], /got an array/],
    ];
    const { opened } = await connectionsDuring(async () => {
      for (const [input, message] of notClients) {
        for (const make of [
          () => new Queue(uniqueQueue('refused'), { connection: input as ConnectionInput }),
          () => new Worker(uniqueQueue('refused'), async () => undefined, { connection: input as ConnectionInput, autorun: false }),
          () => new Broadcast(uniqueQueue('refused'), { connection: input as ConnectionInput }),
          () => new BroadcastWorker(uniqueQueue('refused'), 's', async () => undefined, { connection: input as ConnectionInput, autorun: false }),
        ]) {
          let caught: unknown;
          try {
            make();
          } catch (err) {
            caught = err;
          }
          expect(caught, `${String(input)} was accepted`).to.be.instanceOf(InvalidArgumentError);
          const err = caught as InvalidArgumentError;
          expect(err.code).to.equal('ERR_CONNECTION_INPUT');
          expect(err.message).to.match(/^connection: /).and.match(message).and.include('ioredis client');
        }
      }
    });
    expect(opened, 'a refused input connected somewhere').to.deep.equal([]);
  });

  it('options, { url } and a URL object are still accepted, and an empty object means the defaults', async () => {
    const accepted: ConnectionInput[] = [
      { host: '127.0.0.1', port: server().port },
      { url: server().url },
      new URL(server().url),
    ];
    for (const connection of accepted) {
      const q = new Queue(uniqueQueue('ok'), { connection });
      try {
        await q.waitUntilReady();
        expect((await q.getJobCounts()).waiting).to.equal(0);
      } finally {
        await q.close();
      }
    }
    // ioredis's own defaults for `{}`, as `new Redis({})`: the caller said nothing about where
    expect(settingsFrom({})).to.deep.include({ url: 'redis://127.0.0.1:6379/0', cluster: false });
  });
});
