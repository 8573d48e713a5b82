/**
 * The feature housekeeping a worker's promotion tick runs after promotion: metrics trimming, the
 * dedup sweep, firing due schedulers, and relaying the flow outbox records a crash left. One function call per tick when nothing is due; a second
 * one (glidemq_fireSchedulers) when something is.
 *
 * No time of this process decides anything here: the server says what is due and how long until
 * the next scheduler is (a relative time, waited out on this process's timer), computes interval
 * slots itself, and gives its own now, after which this side computes a cron pattern's next slot.
 */
import type { Client } from '../connecting/connection.js';
import type { QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';
import { nextRunAfter, parseRecord } from '../scheduling/schedulers.js';
import { OUTBOX_GRACE_MS } from '../producing/flow-outbox.js';
import { relayOutboxes } from '../producing/dead-letter-outbox.js';
import { FLOW_JOURNAL_GRACE_MS, replayFlowJournals } from '../producing/flow-journal-replay.js';

export interface UpkeepResult {
  metricsTrimmed: number;
  dedupRemoved: number;
  /** Schedulers this tick fired: name and the id of the job added. */
  fired: { scheduler: string; jobId: string }[];
  /** How many ms from now the next scheduler is due (by the server's clock), or -1 when none is. */
  nextDueIn: number;
  /**
   * @deprecated The same as `nextDueIn`, as a time of this process's clock (Date.now() +
   * nextDueIn), for callers that still subtract their clock from it; use nextDueIn.
   */
  nextDue: number;
  /** Flow outbox records older than the grace period this tick relayed (a crash left them). */
  outboxRelayed?: number;
  /** Flows this tick rolled forward from a journal older than the grace period (a producer died storing them in parts). */
  flowsRolledForward?: number;
}

type ErrorHandler = (err: unknown) => void;

export class Upkeep {
  private readonly onError: ErrorHandler;

  constructor(client: () => Client, keys: QueueKeys, onError?: ErrorHandler);
  /** @deprecated the clock is not used (every time comes from the server): leave it out. */
  constructor(client: () => Client, keys: QueueKeys, clock: () => number, onError?: ErrorHandler);
  constructor(
    private readonly client: () => Client,
    private readonly keys: QueueKeys,
    a?: ErrorHandler | (() => number),
    b?: ErrorHandler,
  ) {
    this.onError = b ?? (a as ErrorHandler | undefined) ?? (() => undefined);
  }

  async onPromotionTick(): Promise<UpkeepResult> {
    const r = (await callFunction(this.client(), 'glidemq_upkeep', this.keys.meta, [])) as (string | number)[];
    const serverNow = Number(r[3]);
    const result: UpkeepResult = { metricsTrimmed: Number(r[0]), dedupRemoved: Number(r[1]), fired: [], nextDueIn: Number(r[2]), nextDue: -1 };
    const triples: (string | number)[] = [];
    const outbox = Number(r[4]);
    const journals = Number(r[5]);
    for (let i = 6; i + 1 < r.length; i += 2) {
      try {
        const rec = parseRecord(String(r[i + 1]));
        // An interval's next slot is the server's to compute (0); a cron pattern's is its first
        // slot after the server's now, not after the missed one: downtime fires one run, not a backlog.
        const next = rec.pattern !== undefined ? nextRunAfter(rec, Math.max(serverNow, rec.nextRun)) : 0;
        triples.push(String(r[i]), rec.nextRun, next);
      } catch (err) {
        this.onError(err); // one unreadable scheduler must not stop the others
      }
    }
    if (triples.length > 0) {
      const fired = (await callFunction(this.client(), 'glidemq_fireSchedulers', this.keys.meta, triples)) as (string | number)[];
      for (let i = 0; i + 2 < fired.length; i += 3) {
        if (!fired[i + 1]) continue; // not fired: another worker did, or it is due again next tick
        result.fired.push({ scheduler: String(fired[i]), jobId: String(fired[i + 1]) });
        const nextIn = Number(fired[i + 2]);
        if (nextIn >= 0 && (result.nextDueIn < 0 || nextIn < result.nextDueIn)) result.nextDueIn = nextIn;
      }
    }
    result.nextDue = result.nextDueIn < 0 ? -1 : Date.now() + result.nextDueIn;
    // flow outbox and dead-outbox records a crash left between a finish and its relay
    // (producing/flow-outbox.ts, producing/dead-letter-outbox.ts):
    // asked for only when the queue holds some
    if (outbox > 0) {
      try {
        result.outboxRelayed = await relayOutboxes(this.client(), this.keys.meta, OUTBOX_GRACE_MS);
      } catch (err) {
        this.onError(err);
      }
    }
    // flows a producer left half stored across hash slots (a cluster), rolled forward
    // (producing/flow-journal-replay.ts): asked for only when the queue holds journals
    if (journals > 0) {
      try {
        result.flowsRolledForward = await replayFlowJournals(this.client(), this.keys.meta, FLOW_JOURNAL_GRACE_MS);
      } catch (err) {
        this.onError(err);
      }
    }
    return result;
  }
}
