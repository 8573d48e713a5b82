/**
 * Upkeep a worker's timers run and the CLI's `pel` / `reclaim` / `heal` call: stalled recovery
 * (the stream's pending entries, and claimed priority/LIFO/group jobs), list-active healing, and the
 * cleanup of consumers that dead processes left in the group. Stalled recovery judges each claim by
 * the lock and maxStalledCount it was made under (lua/activate.lua): the settings here are only the
 * terms of claims that carry none (made by an older glidemq), and the removeOnFail of a job failed
 * for good that names none itself. Every write happens in one Lua
 * function call (lua/reclaim.lua, lua/heal.lua, lua/consumer-cleanup.lua); this class only picks
 * the arguments, walks cursors and shapes the replies. No time is sent: every lock age and idle
 * time is measured by the server's clock inside the functions (README "Clocks").
 */
import { hostname } from 'node:os';
import { acquireClient, closeClient, disconnectClient, isCluster, settleTopology, waitReady, type Client, type ClientSettings } from '../connecting/connection.js';
import { QueueKeys } from '../shared/keys.js';
import { callFunction, ensureLibrary } from '../connecting/library.js';
import { OUTBOX_GRACE_MS } from '../producing/flow-outbox.js';
import { relayDeadLetters, relayOutboxes } from '../producing/dead-letter-outbox.js';
import { releaseAllStuckParents, releaseStuckParents, resettleFinishedChildren } from './flow-repair.js';
import { dueFlowJournals, FLOW_JOURNAL_GRACE_MS, replayFlowJournals } from '../producing/flow-journal-replay.js';
import { encodeRetention, type Retention } from '../producing/options.js';

export interface MaintenanceSettings {
  /** The lock of a claim that carries none of its own (made by an older glidemq; lua/reclaim.lua). */
  lockDuration: number;
  stalledInterval: number;
  /** The maxStalledCount of a claim that carries none of its own. */
  maxStalledCount: number;
  blockTimeout: number;
  /** The retention of a job failed for good by a stalled check that names no removeOnFail itself. */
  removeOnFail?: Retention;
}

export const DEFAULT_MAINTENANCE: MaintenanceSettings = {
  lockDuration: 30_000,
  stalledInterval: 30_000,
  maxStalledCount: 1,
  blockTimeout: 5_000,
};

/** The failedReason of a job failed for good by a stalled check (lua/reclaim.lua STALLED_REASON). */
export const STALLED_REASON = 'job stalled more than maxStalledCount';

export interface ReclaimResult {
  redispatched: string[];
  failed: string[];
  /** Claims no processor had taken (a worker's prefetch): given back with no stall counted. */
  returned: string[];
  consumersRemoved: number;
  /** Per failed id, in order: the job's hash fields as they were when it stalled (a flat list; none in a dry run). */
  failedJobs: string[][];
}

export interface ReclaimReport extends ReclaimResult {
  /** True when the queue is paused: nothing was reclaimed. */
  paused: boolean;
  /** Pending entries of removed jobs (or superseded entries) that were acked and deleted. */
  dropped: number;
  dryRun: boolean;
}

export interface ReclaimOptions {
  /**
   * The lock (ms) of a claim that carries none of its own (made by an older glidemq, or a delivered
   * entry never activated); default the lock duration. Every other claim is judged by the lock it
   * was made under.
   */
  minIdle?: number;
  /** The maxStalledCount of a claim that carries none of its own. */
  maxStalledCount?: number;
  /** List what would happen and change nothing. */
  dryRun?: boolean;
  /** Stale-consumer threshold (ms); default max(10 × stalledInterval, 3 × blockTimeout, 60s). */
  consumerIdleMs?: number;
}

export interface StreamClaim {
  entryId: string;
  jobId: string;
  name: string;
  consumer: string;
  idleMs: number;
  deliveries: number;
  attemptsMade: number;
  /** The job's state: 'active' once activated; 'waiting' for a delivered, not yet activated entry. */
  state: string;
}

export interface ListClaim {
  jobId: string;
  name: string;
  consumer: string;
  idleMs: number;
  attemptsMade: number;
  kind: 'priority' | 'lifo' | 'group';
}

export interface Claims {
  stream: StreamClaim[];
  list: ListClaim[];
  /** False when list-active-ids is not seeded or short of the counter: the list part may be incomplete. */
  listTrusted: boolean;
}

export type HealMode = 'trusted' | 'scanning' | 'seeded' | 'untrusted' | 'missing';

/** One glidemq_healListActive call. */
export interface HealStep {
  mode: HealMode;
  counterBefore: number;
  counterAfter: number;
  membersDropped: number;
  membersAdded: number;
  seeded: boolean;
  /** Where the next re-seed call resumes ('0' when not scanning). */
  cursor: string;
}

export interface HealReport {
  queue: string;
  counterBefore: number;
  counterAfter: number;
  membersDropped: number;
  membersAdded: number;
  /** Heal calls it took (a re-seed of a large keyspace takes several). */
  calls: number;
  seeded: boolean;
  /** The set was re-seeded from a scan (check mode: needs to be: marker missing or set short of the counter). */
  reseeded: boolean;
  consumersRemoved: number;
  /** list-active bookkeeping was (check mode: would be) repaired. Stale consumers are not drift. */
  drift: boolean;
  check: boolean;
  /** Flow outbox records past their grace period relayed (check mode: found): a crash left them (producing/flow-outbox.ts). */
  outboxRelayed?: number;
  /** Flows rolled forward (check mode: found) from a journal past its grace period: a producer died storing them in parts across hash slots (producing/flow-journal-replay.ts). */
  flowsRolledForward?: number;
  /** Children of other queues that finished but still held a waiting parent (a settlement a failover lost), settled again (check mode: found; flow-repair.ts). */
  settlementsRepaired?: number;
  /** Parents left in waiting-children with no dependency, queued (check mode: found; flow-repair.ts). */
  parentsReleased?: number;
}

/** Waiting parents a worker's upkeep looks at per lost-settlement round (every 10th promotion tick), the next ones the next round. */
const UPKEEP_PARENTS = 100;
/** A parent with more unsettled dependencies than this is left to `glidemq heal` by upkeep (each child is read). */
const UPKEEP_MAX_DEPS = 1000;

/** The failed jobs of a reclaim reply: a flat field/value list per job. */
function fieldLists(v: unknown): string[][] {
  return ((v ?? []) as unknown[][]).map((f) => f.map(String));
}

/** Most calls one `reclaim`/`heal` run makes while walking a cursor (a safety bound). */
const MAX_WALK_CALLS = 10_000;

export class Maintenance {
  private streamCursor = '0-0';
  private reclaiming: Promise<ReclaimResult> | undefined;

  constructor(
    private readonly client: Client,
    readonly keys: QueueKeys,
    private readonly settings: MaintenanceSettings = DEFAULT_MAINTENANCE,
  ) {}

  /** How long a consumer holding nothing must be idle before stalled reclaim deletes it. */
  get consumerIdleThreshold(): number {
    const s = this.settings;
    return Math.max(10 * s.stalledInterval, 3 * s.blockTimeout, 60_000);
  }

  /** Where the next lost-settlement round of upkeep looks in waiting-children (by rank). */
  private parentsCursor = 0;

  /**
   * Called on every promotion tick of a worker: every 10th one heals list-active and repairs lost
   * settlements in a page of the waiting parents (the next page the next time): parents left
   * waiting with no dependency are queued, and on a cluster finished children of other queues a
   * failover left counted are settled again (flow-repair.ts; outbox records are the Upkeep's).
   */
  async onPromotionTick(tick: number): Promise<void> {
    if (tick % 10 !== 0) return;
    await this.healListActive();
    await this.repairSettlementsPage();
  }

  private async repairSettlementsPage(): Promise<void> {
    if ((await this.client.zcard(this.keys.waitingChildren)) === 0) return;
    const start = this.parentsCursor;
    if (isCluster(this.client)) await resettleFinishedChildren(this.client, this.keys, false, start, UPKEEP_PARENTS, UPKEEP_MAX_DEPS);
    this.parentsCursor = (await releaseStuckParents(this.client, this.keys, false, start, UPKEEP_PARENTS)).next;
  }

  /**
   * Stalled recovery as a worker's scheduler runs it every stalledInterval: one bounded walk of the
   * pending entries list (resuming where the previous call stopped) and one pass over list claims.
   */
  reclaimStalled(consumer: string): Promise<ReclaimResult> {
    // a slow call is not stacked upon by the next interval
    this.reclaiming ??= this.reclaimOnce(consumer).finally(() => {
      this.reclaiming = undefined;
    });
    return this.reclaiming;
  }

  private async reclaimOnce(consumer: string): Promise<ReclaimResult> {
    const s = this.settings;
    const opts = { minIdle: s.lockDuration, maxStalledCount: s.maxStalledCount, dryRun: false, consumerIdleMs: this.consumerIdleThreshold };
    const stream = await this.reclaimStreamPage(consumer, this.streamCursor, opts);
    if (stream.paused) return { redispatched: [], failed: [], returned: [], consumersRemoved: 0, failedJobs: [] };
    this.streamCursor = stream.cursor;
    const list = await this.reclaimListJobs(opts);
    // jobs failed for good may have left dead letters for another slot (a cluster): relayed now
    if (stream.failed.length + list.failed.length > 0) await this.relayDeadLetters();
    return {
      redispatched: [...stream.redispatched, ...list.redispatched],
      failed: [...stream.failed, ...list.failed],
      returned: [...stream.returned, ...list.returned],
      consumersRemoved: stream.consumersRemoved,
      failedJobs: [...stream.failedJobs, ...list.failedJobs],
    };
  }

  /**
   * Stalled recovery run to completion, as `glidemq reclaim` does: the whole pending entries list
   * (cursor walked until it wraps), then the list claims. Claims pass through a consumer of this
   * process, which is deleted again afterwards.
   */
  async reclaim(opts: ReclaimOptions = {}): Promise<ReclaimReport> {
    const o = this.reclaimDefaults(opts);
    const consumer = `glidemq-reclaim:${hostname()}:${process.pid}`;
    const report: ReclaimReport = { redispatched: [], failed: [], returned: [], consumersRemoved: 0, failedJobs: [], paused: false, dropped: 0, dryRun: o.dryRun };
    try {
      let cursor = '0-0';
      for (let calls = 0; calls < MAX_WALK_CALLS; calls++) {
        const page = await this.reclaimStreamPage(consumer, cursor, o);
        if (page.paused) return { ...report, paused: true };
        report.redispatched.push(...page.redispatched);
        report.failed.push(...page.failed);
        report.returned.push(...page.returned);
        report.failedJobs.push(...page.failedJobs);
        report.consumersRemoved += page.consumersRemoved;
        report.dropped += page.dropped;
        cursor = page.cursor;
        if (cursor === '0-0') break;
      }
      const list = await this.reclaimListJobs(o);
      if (list.paused) return { ...report, paused: true };
      report.redispatched.push(...list.redispatched);
      report.failed.push(...list.failed);
      report.returned.push(...list.returned);
      report.failedJobs.push(...list.failedJobs);
      if (!o.dryRun && report.failed.length > 0) await this.relayDeadLetters();
      return report;
    } finally {
      if (!o.dryRun) await this.removeOwnConsumer(consumer).catch(() => undefined);
    }
  }

  /** Relays the dead letters a stalled check's failures left for another slot (dead-letter-outbox.ts); a relay that fails is left to upkeep. */
  private async relayDeadLetters(): Promise<void> {
    await relayDeadLetters(this.client, this.keys.meta, 0).catch(() => undefined);
  }

  private reclaimDefaults(opts: ReclaimOptions): Required<ReclaimOptions> {
    return {
      minIdle: opts.minIdle ?? this.settings.lockDuration,
      maxStalledCount: opts.maxStalledCount ?? this.settings.maxStalledCount,
      dryRun: !!opts.dryRun,
      consumerIdleMs: opts.consumerIdleMs ?? this.consumerIdleThreshold,
    };
  }

  private async reclaimStreamPage(consumer: string, cursor: string, o: Required<ReclaimOptions>) {
    const r = (await callFunction(this.client, 'glidemq_reclaimStalled', this.keys.meta, [
      consumer,
      o.minIdle,
      o.maxStalledCount,
      o.consumerIdleMs,
      o.dryRun ? '1' : '0',
      cursor,
      this.keepFailed,
    ])) as unknown[];
    if (r[0] === 'paused') return { paused: true, redispatched: [], failed: [], returned: [], consumersRemoved: 0, cursor, dropped: 0, failedJobs: [] };
    return {
      paused: false,
      redispatched: (r[1] as string[]).map(String),
      failed: (r[2] as string[]).map(String),
      returned: ((r[6] ?? []) as string[]).map(String),
      consumersRemoved: Number(r[3]),
      cursor: String(r[4]),
      dropped: Number(r[5]),
      failedJobs: fieldLists(r[7]),
    };
  }

  private async reclaimListJobs(o: Required<ReclaimOptions>) {
    const r = (await callFunction(this.client, 'glidemq_reclaimStalledListJobs', this.keys.meta, [
      o.minIdle,
      o.maxStalledCount,
      o.dryRun ? '1' : '0',
      this.keepFailed,
    ])) as unknown[];
    if (r[0] === 'paused') return { paused: true, redispatched: [] as string[], failed: [] as string[], returned: [] as string[], failedJobs: [] as string[][] };
    return {
      paused: false,
      redispatched: (r[1] as string[]).map(String),
      failed: (r[2] as string[]).map(String),
      returned: ((r[5] ?? []) as string[]).map(String),
      source: String(r[3]),
      failedJobs: fieldLists(r[6]),
    };
  }

  /** The retention rule of a job this worker's stalled check fails that names none itself (lua/reclaim.lua keepFailed). */
  private get keepFailed(): string {
    return encodeRetention(this.settings.removeOnFail);
  }

  /**
   * Claimed but unfinished jobs: the stream's pending entries and the priority/LIFO list claims.
   * Idle times are the server's (pending entries' idle, server TIME - lockedAt), as reclaim sees them.
   */
  async listClaims(opts: { minIdle?: number; limit?: number } = {}): Promise<Claims> {
    const r = (await callFunction(this.client, 'glidemq_listClaims', this.keys.meta, [opts.minIdle ?? 0, opts.limit ?? 1000])) as [
      unknown[][],
      unknown[][],
      number,
    ];
    return {
      stream: r[0].map((e) => ({
        entryId: String(e[0]),
        jobId: String(e[1]),
        name: String(e[2]),
        consumer: String(e[3]),
        idleMs: Number(e[4]),
        deliveries: Number(e[5]),
        attemptsMade: Number(e[6]),
        state: String(e[7]),
      })),
      list: r[1].map((e) => ({
        jobId: String(e[0]),
        name: String(e[1]),
        consumer: String(e[2]),
        idleMs: Number(e[3]),
        attemptsMade: Number(e[4]),
        kind: e[5] === 'p' ? 'priority' : e[5] === 'g' ? 'group' : 'lifo',
      })),
      listTrusted: r[2] === 1,
    };
  }

  /** One glidemq_healListActive call (bounded: a re-seed resumes from meta on the next call). */
  async healListActive(opts: { check?: boolean; maxPages?: number } = {}): Promise<HealStep> {
    const r = (await callFunction(this.client, 'glidemq_healListActive', this.keys.meta, [opts.check ? '1' : '0', opts.maxPages ?? 500])) as unknown[];
    return {
      mode: String(r[0]) as HealMode,
      counterBefore: Number(r[1]),
      counterAfter: Number(r[2]),
      membersDropped: Number(r[3]),
      membersAdded: Number(r[4]),
      seeded: r[5] === 1,
      cursor: String(r[6]),
    };
  }

  /**
   * `glidemq heal`: list-active healing carried through to a trusted set (a re-seed of a large
   * keyspace takes several bounded calls), then stale-consumer cleanup. With `check`, nothing is
   * changed and `drift` says whether a heal would change something.
   */
  async heal(opts: { check?: boolean; consumerIdleMs?: number } = {}): Promise<HealReport> {
    const check = !!opts.check;
    let step = await this.healListActive({ check });
    const report: HealReport = {
      queue: this.keys.queue,
      counterBefore: step.counterBefore,
      counterAfter: step.counterAfter,
      membersDropped: step.membersDropped,
      membersAdded: step.membersAdded,
      calls: 1,
      seeded: step.seeded,
      reseeded: step.mode === 'scanning' || step.mode === 'seeded' || step.mode === 'untrusted',
      consumersRemoved: 0,
      drift: false,
      check,
    };
    while (step.mode === 'scanning' && report.calls < MAX_WALK_CALLS) {
      step = await this.healListActive();
      report.calls++;
      report.membersDropped += step.membersDropped;
      report.membersAdded += step.membersAdded;
    }
    report.counterAfter = step.counterAfter;
    report.seeded = step.seeded;
    report.consumersRemoved = await this.removeStaleConsumers({ dryRun: check, idleMs: opts.consumerIdleMs });
    report.outboxRelayed = check
      ? ((await callFunction(this.client, 'glidemq_outboxList', this.keys.meta, [OUTBOX_GRACE_MS, 10000])) as unknown[]).length / 2 +
        ((await callFunction(this.client, 'glidemq_deadOutboxList', this.keys.meta, [OUTBOX_GRACE_MS, 10000])) as unknown[]).length / 2
      : await relayOutboxes(this.client, this.keys.meta, OUTBOX_GRACE_MS);
    // Only a cluster stores a flow in parts, and only there are a child's record and its parent's
    // settle on two primaries (one server's replica has both or neither): no calls elsewhere.
    if (isCluster(this.client)) {
      // flows a producer left half stored across hash slots, rolled forward from their journal
      report.flowsRolledForward = check
        ? await dueFlowJournals(this.client, this.keys.meta, FLOW_JOURNAL_GRACE_MS)
        : await replayFlowJournals(this.client, this.keys.meta, FLOW_JOURNAL_GRACE_MS);
      // settlements of children in other queues a failover of the parent's node lost (flow-repair.ts)
      report.settlementsRepaired = await resettleFinishedChildren(this.client, this.keys, check);
    }
    // parents left waiting with no dependency (a settlement lost anywhere)
    report.parentsReleased = await releaseAllStuckParents(this.client, this.keys, check);
    // half-stored flows and lost settlements are drift as the list-active bookkeeping is
    report.drift =
      report.reseeded ||
      report.counterBefore !== report.counterAfter ||
      report.membersDropped > 0 ||
      report.membersAdded > 0 ||
      (report.outboxRelayed ?? 0) > 0 ||
      (report.flowsRolledForward ?? 0) > 0 ||
      (report.settlementsRepaired ?? 0) > 0 ||
      report.parentsReleased > 0;
    return report;
  }

  /** Deletes up to 20 consumers that hold nothing and are idle past the threshold. */
  async removeStaleConsumers(opts: { idleMs?: number; keep?: string; dryRun?: boolean } = {}): Promise<number> {
    return Number(
      await callFunction(this.client, 'glidemq_removeStaleConsumers', this.keys.meta, [
        opts.keep ?? '',
        opts.idleMs ?? this.consumerIdleThreshold,
        opts.dryRun ? '1' : '0',
      ]),
    );
  }

  /** Deletes a consumer only if it holds no pending entry (one step on the server). */
  async removeOwnConsumer(consumer: string): Promise<boolean> {
    return (await callFunction(this.client, 'glidemq_removeIdleConsumer', this.keys.meta, [consumer])) === 1;
  }

  /** True when the queue has been created (it has a meta hash). */
  async queueExists(): Promise<boolean> {
    return (await this.client.exists(this.keys.meta)) === 1;
  }
}

/** A connection for upkeep commands (the CLI): maintenance objects per queue, one client, closed once. */
export class MaintenanceSession {
  private constructor(
    readonly client: Client,
    private readonly prefix: string,
  ) {}

  /**
   * Connects (failing fast with a one-line error naming `label`; a URL naming a cluster node gets a
   * cluster client) and ensures the library.
   */
  static async open(settings: ClientSettings, prefix: string, label = settings.url): Promise<MaintenanceSession> {
    const acquired = acquireClient(settings);
    try {
      const client = await settleTopology(acquired);
      await waitReady(client, label, isCluster(client) ? 15_000 : 5_000);
      await ensureLibrary(client);
      return new MaintenanceSession(client, prefix);
    } catch (err) {
      disconnectClient(acquired.client);
      throw err;
    }
  }

  queue(name: string, settings: Partial<MaintenanceSettings> = {}): Maintenance {
    return new Maintenance(this.client, new QueueKeys(name, this.prefix), { ...DEFAULT_MAINTENANCE, ...settings });
  }

  async close(): Promise<void> {
    await closeClient(this.client);
  }
}
