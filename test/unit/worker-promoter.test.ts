/**
 * The Worker's promoter without a server: a fake client answers glidemq_promote when the test says,
 * so the timer's arming can be read at each step.
 */
import { expect } from 'chai';
import type { Client } from '../../src/engine/connecting/connection.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import type { Maintenance } from '../../src/engine/administering/maintenance.js';
import type { Upkeep } from '../../src/engine/administering/upkeep.js';
import { resolveSettings } from '../../src/engine/consuming/worker-options.js';
import { PROMOTE_BATCH, Promoter } from '../../src/engine/consuming/worker-promoter.js';
import { waitFor } from '../helpers/valkey.js';

const INTERVAL = 60_000;

/** A promoter over a fake client whose glidemq_promote calls wait in `calls` until answered. */
function fakePromoter() {
  const calls: ((reply: number[]) => void)[] = [];
  const errors: unknown[] = [];
  let live = true;
  const client = { fcall: () => new Promise<number[]>((resolve) => calls.push(resolve)) } as unknown as Client;
  const promoter = new Promoter({
    client: () => client,
    keys: new QueueKeys('promoter-unit', 'glide'),
    consumer: 'unit',
    settings: resolveSettings({ promotionInterval: INTERVAL }),
    claimTerms: [30_000, 1],
    maintenance: () => ({ onPromotionTick: async () => undefined }) as unknown as Maintenance,
    upkeep: { onPromotionTick: async () => ({ nextDueIn: -1 }) } as unknown as Upkeep,
    live: () => live,
    emit: () => undefined,
    emitError: (err) => errors.push(err),
  });
  return { promoter, calls, errors, stop: () => ((live = false), promoter.stop()) };
}

/** ms from now until the promoter's armed timer fires. */
const armedIn = (p: Promoter) => (p.dueAt === undefined ? undefined : p.dueAt - performance.now());

describe('Worker promoter (no server)', () => {
  it('a due time moves promotion earlier, never later', () => {
    const { promoter, stop } = fakePromoter();
    try {
      expect(promoter.dueAt).to.equal(undefined);
      promoter.promoteBy(40_000); // nothing armed: arms for it
      expect(armedIn(promoter)).to.be.within(39_000, 40_000);
      promoter.promoteBy(50_000); // later: no change
      expect(armedIn(promoter)).to.be.within(39_000, 40_000);
      promoter.promoteBy(10_000); // earlier: moves
      expect(armedIn(promoter)).to.be.within(9_000, 10_000);
    } finally {
      stop();
    }
  });

  it('a due time heard while a promotion is in flight arms the next one for it, once that promotion ends', async () => {
    const { promoter, calls, errors, stop } = fakePromoter();
    try {
      promoter.schedule(0);
      await waitFor(() => calls.length === 1, 'the promotion call');
      promoter.promoteBy(5_000);
      calls[0]([0, -1]); // nothing promoted, nothing delayed: the regular interval, unless told sooner
      await waitFor(() => (armedIn(promoter) ?? 0) > 0, 'the next promotion armed');
      expect(armedIn(promoter)).to.be.within(3_000, 5_000);
      expect(errors).to.deep.equal([]);
    } finally {
      stop();
    }
  });

  it('a full batch asks for the next one at once; a sooner delayed job shortens the interval', async () => {
    const { promoter, calls, stop } = fakePromoter();
    try {
      promoter.schedule(0);
      await waitFor(() => calls.length === 1, 'the first promotion call');
      calls[0]([PROMOTE_BATCH, 0]);
      await waitFor(() => calls.length === 2, 'the next batch at once');
      calls[1]([3, 20_000]);
      await waitFor(() => (armedIn(promoter) ?? 0) > 0, 'the next promotion armed');
      expect(armedIn(promoter)).to.be.within(18_000, 20_000);
    } finally {
      stop();
    }
  });
});
