/**
 * Confirmed writes under crashes (issue 31, README "Durability"), against real valkey-server
 * processes:
 * - a power cut (test/helpers/power-loss.ts: what the server had not fsynced is gone): under
 *   `appendfsync everysec` unconfirmed adds may lose acknowledged jobs (the figures are printed),
 *   and so may adds each followed by a raw WAITAOF 1 0, because Valkey's WAITAOF acknowledges
 *   before the fsync there (producing/confirm.ts waitaofAcksBeforeFsync), which is why glidemq
 *   refuses `confirm: { fsync: true }` on such a server; under `appendfsync always`, adds with
 *   `confirm: { fsync: true }` lose none, over repeated cuts;
 * - a primary with one replica, SIGKILLed under load and the replica promoted (REPLICAOF NO ONE):
 *   unconfirmed adds may lose acknowledged jobs; adds with `confirm: { replicas: 1 }` lose none.
 * Short form in `make test`; GLIDEMQ_SOAK=1 (`make soak`) runs more crashes with more producers.
 */
import { expect } from 'chai';
import { PowerLossServer, powerLossSupported } from '../helpers/power-loss.js';
import { TestServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';
import { addUntilCrash, crashClient, emptyTally, lostJobs, tallyLine, type RoundOptions, type Tally } from '../helpers/confirm-chaos.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { NotSupportedError } from '../../src/engine/shared/errors.js';
import { serverOf, waitaofAcksBeforeFsync, type ConfirmOptions } from '../../src/engine/producing/confirm.js';

const SOAK = process.env.GLIDEMQ_SOAK === '1';
/** Crashes per mode, producers, and acknowledgements before each crash. */
const SIZE = SOAK ? { rounds: 5, lanes: 16, cutAfter: 2000 } : { rounds: 2, lanes: 4, cutAfter: 150 };

/** A replica's first sync starts at once (the default waits 5 s for more replicas to share it). */
const REPL_CONFIG = ['repl-diskless-sync-delay 0'];

function report(tallies: Tally[]): void {
  for (const t of tallies) console.log(`      ${tallyLine(t)}`);
}

describe('confirmed writes under crashes (chaos)', function () {
  this.timeout(SOAK ? 0 : 60000);

  describe('a power cut', () => {
    let server: PowerLossServer | undefined;
    const tallies: Tally[] = [];
    before(function () {
      expect(powerLossSupported(), 'the power-loss harness needs Linux and a C compiler (cc)').to.equal(true);
    });
    afterEach(async () => {
      await server?.stop();
      server = undefined;
    });
    after(() => report(tallies));

    /** `rounds` power cuts, the server booted again on its directory after each; the tally of the mode. */
    async function cuts(mode: string, persistence: 'aof-everysec' | 'aof-always', add: Pick<RoundOptions, 'confirm' | 'rawWaitaof'>, rounds: number): Promise<Tally> {
      const t = emptyTally(mode);
      tallies.push(t);
      server = await new PowerLossServer({ persistence }).start();
      for (let r = 0; r < rounds; r++) {
        const name = uniqueQueue('cut');
        const s = server;
        const round = await addUntilCrash({ port: s.port, queueName: name, ...add, lanes: SIZE.lanes, cutAfter: SIZE.cutAfter, crash: () => s.powerCut() });
        await s.start();
        const lost = await lostJobs(s.port, name, round.acknowledged);
        t.rounds++;
        t.attempted += round.attempted;
        t.acknowledged += round.acknowledged.length;
        t.lost += lost.length;
      }
      return t;
    }

    it('everysec, unconfirmed adds: acknowledged jobs may be lost (counted)', async () => {
      const t = await cuts('everysec, unconfirmed', 'aof-everysec', {}, 1);
      expect(t.acknowledged).to.be.at.least(SIZE.cutAfter);
      expect(t.lost).to.be.at.least(0);
    });

    it('everysec, each add followed by a raw WAITAOF 1 0: acknowledged jobs may be lost too (counted: the server acknowledges before its fsync)', async () => {
      const t = await cuts('everysec, raw WAITAOF 1 0 after each add', 'aof-everysec', { rawWaitaof: true }, 1);
      expect(t.acknowledged).to.be.at.least(SIZE.cutAfter);
      expect(t.lost).to.be.at.least(0);
    });

    it('everysec, confirm { fsync: true }: refused before anything is written where WAITAOF acknowledges before the fsync (Valkey), else none lost', async () => {
      server = await new PowerLossServer({ persistence: 'aof-everysec' }).start();
      const c = await crashClient(server.port);
      const early = waitaofAcksBeforeFsync(serverOf(await c.info('server')), 'everysec');
      c.disconnect();
      if (!early) {
        // a server whose WAITAOF waits for the fsync (Redis 8): confirmed adds survive the cuts
        await server.stop();
        server = undefined;
        const t = await cuts('everysec, confirm { fsync: true }', 'aof-everysec', { confirm: { fsync: true } }, SIZE.rounds);
        expect(t.lost, tallyLine(t)).to.equal(0);
        return;
      }
      const q = new Queue(uniqueQueue('cut'), { connection: server.url, confirm: { fsync: true } });
      try {
        let refused: unknown;
        await q.add('j', {}).catch((err) => (refused = err));
        expect(refused).to.be.instanceOf(NotSupportedError);
        expect((refused as Error).message).to.match(/acknowledges writes before they are fsynced unless appendfsync is always/);
        expect(await q.count()).to.equal(0);
      } finally {
        await q.close();
      }
    });

    it('always, confirm { fsync: true }: none acknowledged is lost, over repeated cuts', async () => {
      const t = await cuts('always, confirm { fsync: true }', 'aof-always', { confirm: { fsync: true } }, SIZE.rounds);
      expect(t.acknowledged).to.be.at.least(SIZE.cutAfter * SIZE.rounds);
      expect(t.lost, tallyLine(t)).to.equal(0);
    });
  });

  describe('a primary SIGKILLed and its replica promoted', () => {
    const servers: TestServer[] = [];
    const tallies: Tally[] = [];
    afterEach(async () => {
      await Promise.all(servers.splice(0).map((s) => s.stop()));
    });
    after(() => report(tallies));

    async function replicaOf(primary: TestServer): Promise<TestServer> {
      const replica = await new TestServer({ config: REPL_CONFIG }).start();
      servers.push(replica);
      const c = await crashClient(replica.port);
      try {
        await c.replicaof('127.0.0.1', primary.port);
        await waitFor(async () => /master_link_status:up/.test(await c.info('replication')), 'the replica to sync');
      } finally {
        c.disconnect();
      }
      return replica;
    }

    /** `rounds` failovers: each promoted replica is the next round's primary, with a new replica. */
    async function failovers(mode: string, confirm: ConfirmOptions | undefined, rounds: number): Promise<Tally> {
      const t = emptyTally(mode);
      tallies.push(t);
      let primary = await new TestServer({ config: REPL_CONFIG }).start();
      servers.push(primary);
      for (let r = 0; r < rounds; r++) {
        const replica = await replicaOf(primary);
        const name = uniqueQueue('failover');
        const p = primary;
        const round = await addUntilCrash({ port: p.port, queueName: name, confirm, lanes: SIZE.lanes, cutAfter: SIZE.cutAfter, crash: () => p.kill() });
        const c = await crashClient(replica.port);
        try {
          await c.replicaof('NO', 'ONE'); // the promotion
        } finally {
          c.disconnect();
        }
        const lost = await lostJobs(replica.port, name, round.acknowledged);
        t.rounds++;
        t.attempted += round.attempted;
        t.acknowledged += round.acknowledged.length;
        t.lost += lost.length;
        primary = replica;
      }
      return t;
    }

    it('unconfirmed adds: acknowledged jobs may be lost (counted)', async () => {
      const t = await failovers('failover, unconfirmed', undefined, 1);
      expect(t.acknowledged).to.be.at.least(SIZE.cutAfter);
      expect(t.lost).to.be.at.least(0);
    });

    it('adds with confirm { replicas: 1 }: none acknowledged is lost, over repeated failovers', async () => {
      const t = await failovers('failover, confirm { replicas: 1 }', { replicas: 1 }, SIZE.rounds);
      expect(t.acknowledged).to.be.at.least(SIZE.cutAfter * SIZE.rounds);
      expect(t.lost, tallyLine(t)).to.equal(0);
    });
  });
});
