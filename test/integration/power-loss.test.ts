/**
 * The power-loss harness itself (test/helpers/power-loss.ts): a SIGKILL of a server started
 * through it loses exactly what a power cut would. Under `appendfsync everysec` the writes the
 * server acknowledged after its last fsync are gone after the restart, and the synced ones are
 * there; under `appendfsync always` nothing acknowledged is lost.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { PowerLossServer, powerLossSupported } from '../helpers/power-loss.js';
import { waitFor } from '../helpers/valkey.js';

/**
 * Writes k0, k1, ... (one SET at a time, each awaited: acknowledged) until the power cut, which
 * comes while writes are in flight. Returns the keys the server acknowledged before the cut.
 */
async function writeUntilPowerCut(server: PowerLossServer, c: Redis, cutAfter: number): Promise<string[]> {
  const acked: string[] = [];
  let cut: Promise<void> | undefined;
  for (let i = 0; ; i++) {
    try {
      await c.set(`k${i}`, 'v');
    } catch {
      break; // the server is gone
    }
    acked.push(`k${i}`);
    if (i === cutAfter) cut = server.powerCut();
    if (cut && !server.proc) break;
  }
  await cut;
  return acked;
}

describe('power-loss harness (LD_PRELOAD holdfsync)', function () {
  this.timeout(60000);
  let server: PowerLossServer | undefined;

  before(function () {
    expect(powerLossSupported(), 'the power-loss harness needs Linux and a C compiler (cc)').to.equal(true);
  });

  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function lostAfterRestart(acked: string[]): Promise<{ lost: string[]; kept: string[] }> {
    await server!.start();
    const c = server!.client();
    try {
      const present = await Promise.all(acked.map((k) => c.exists(k)));
      return { lost: acked.filter((_, i) => present[i] === 0), kept: acked.filter((_, i) => present[i] === 1) };
    } finally {
      c.disconnect();
    }
  }

  it('everysec: what was acknowledged after the last fsync is lost; what was synced is kept', async () => {
    server = await new PowerLossServer({ persistence: 'aof-everysec' }).start();
    const c = server.client();
    c.on('error', () => undefined); // the cut drops the connection
    await c.set('synced', 'v');
    await server.waitDurable('synced');
    const acked = await writeUntilPowerCut(server, c, 200);
    c.disconnect();
    const onDisk = server.durableAof();
    const { lost, kept } = await lostAfterRestart(['synced', ...acked]);
    expect(kept).to.include('synced');
    expect(lost.length, 'acknowledged writes lost by the power cut').to.be.greaterThan(0);
    // exactly the acknowledged writes that were not on disk at the cut are lost
    for (const k of acked) expect(lost.includes(k), k).to.equal(!onDisk.includes(`\r\n${k}\r\n`));
    // the lost ones are the last ones: a suffix of what was acknowledged
    expect(acked.slice(acked.length - lost.length)).to.deep.equal(lost);
  });

  it('everysec across an AOF rewrite: what was synced before and after it is kept, the unsynced tail lost', async () => {
    server = await new PowerLossServer({ persistence: 'aof-everysec' }).start();
    const c = server.client();
    c.on('error', () => undefined); // the cut drops the connection
    await c.set('before-rewrite', 'v');
    await server.waitDurable('before-rewrite');
    await c.bgrewriteaof();
    await waitFor(async () => /aof_rewrite_in_progress:0[\s\S]*aof_rewrite_scheduled:0/.test(await c.info('persistence')), 'the rewrite');
    await c.set('after-rewrite', 'v');
    await server.waitDurable('after-rewrite'); // in the new incr file
    const acked = await writeUntilPowerCut(server, c, 200);
    c.disconnect();
    const { lost, kept } = await lostAfterRestart(['before-rewrite', 'after-rewrite', ...acked]);
    expect(kept).to.include.members(['before-rewrite', 'after-rewrite']);
    expect(lost.length).to.be.greaterThan(0);
    expect(acked.slice(acked.length - lost.length)).to.deep.equal(lost);
  });

  it('always: nothing acknowledged is lost', async () => {
    server = await new PowerLossServer({ persistence: 'aof-always' }).start();
    const c = server.client();
    c.on('error', () => undefined); // the cut drops the connection
    const acked = await writeUntilPowerCut(server, c, 200);
    c.disconnect();
    expect(acked.length).to.be.greaterThan(200);
    const { lost } = await lostAfterRestart(acked);
    expect(lost).to.deep.equal([]);
  });
});
