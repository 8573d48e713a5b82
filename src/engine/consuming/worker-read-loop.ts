/**
 * The Worker's read loop: takes jobs while slots are free. It blocks on one XREADGROUP (over the
 * job stream and the wake stream) and turns what it delivers into claims (glidemq_activate); on a
 * queue with a globalConcurrency limit or a rate limiter it takes jobs only through glidemq_fetch
 * (limitedStep), waits out the rate window a reply names, and while the queue is paused it waits
 * for the event that resumes it.
 */
import type { Acquired, Client } from '../connecting/connection.js';
import type { ClaimReply } from '../jobs/job.js';
import { callFunction, nameWrongTypeKey } from '../connecting/library.js';
import { ChangeWaiter } from './change-waiter.js';
import { BlockingReader } from './blocking-reader.js';
import { IdleWaiters } from '../shared/idle-waiters.js';
import { CLOSE_CALL_MS, delay, within } from '../shared/waiting.js';
import type { WorkerPart } from './worker-part.js';

/** What a fetch or an activation delivered: its status ('ok', 'paused', 'limited'), the claims. */
export interface Delivered {
  status: string;
  jobs: ClaimReply[];
}

/** What the read loop needs from its worker. */
export interface ReadLoopHost extends WorkerPart {
  acquired: Acquired;
  /** Claims the blocking read and fetches may take now (the prefetch buffer's readerRoom). */
  room(): number;
  /** Runs a claim, or keeps it for a free slot. */
  dispatch(reply: ClaimReply): void;
  /** No run and no prefetched claim is left here. */
  idle(): boolean;
  /** A wake entry said a delayed job is due in `ms` (the promoter). */
  promoteBy(ms: number): void;
}

/** The blocking connection as the read loop uses it (a BlockingReader). */
export type Reader = Pick<BlockingReader, 'client' | 'start' | 'read' | 'waitForEvent' | 'unblock' | 'close'>;

/** The read loop's blocking connection, made by open(). */
function blockingReader(host: ReadLoopHost): Reader {
  return new BlockingReader(host.acquired, host.keys, host.consumer, host.settings.blockTimeout);
}

export class ReadLoop {
  private reader: Reader | undefined;
  /** The loop runs (one at a time). */
  running = false;
  /** Claims the blocking read in flight may deliver (counted by the slot ledger). */
  reserved = 0;
  /** A job arrived since the last `drained` (set by the worker's dispatch). */
  hadWork = false;
  /**
   * The queue has a globalConcurrency limit or a rate limiter: take jobs only through
   * glidemq_fetch/finish (see limitedStep).
   */
  limited = false;
  private pausedSince = '$';
  /**
   * The rate limiter (or a hold, rateLimit) lets no job start before this time of this process's
   * monotonic clock (performance.now; 0: none): set from the relative wait a 'rated' reply carries
   * (the server computed it with its own clock), waited out by the read loop (waitOutRate).
   */
  private rateWaitUntil = 0;
  /** The timer of that wait, and how to end it early (close). */
  private rateTimer: { timer: NodeJS.Timeout; end: () => void } | undefined;
  private readonly changes: ChangeWaiter;
  /** The last fetch found the queue paused (queuePaused/queueResumed are told on a change). */
  private queuePaused = false;
  /** Consecutive failed rounds of the read loop (the backoff grows with it). */
  private readFailures = 0;

  /**
   * Calls on their way that may bring claims (fetches, a blocking read and its activation): close()
   * waits for them.
   */
  private claimCalls = 0;
  private readonly claimsSettled = new IdleWaiters(() => this.claimCalls);

  constructor(
    private readonly host: ReadLoopHost,
    /** Makes the blocking connection (a test gives a reader of its own). */
    private readonly makeReader: (host: ReadLoopHost) => Reader = blockingReader,
  ) {
    this.changes = new ChangeWaiter(host.keys);
  }

  /** Opens the blocking connection; resolves to its client. */
  async open(): Promise<Client> {
    this.reader = this.makeReader(this.host);
    await this.reader.start();
    return this.reader.client;
  }

  /** Ends a blocking read in flight (from the command connection). */
  unblock(): Promise<void> | undefined {
    return this.reader?.unblock(this.host.client());
  }

  /** Ends the wait of a rate window early (close). */
  endRateWait(): void {
    this.rateTimer?.end();
  }

  closeReader(): void {
    this.reader?.close();
  }

  /** Starts the loop when it is not running and slots are free. */
  kick(): void {
    if (this.host.live() && !this.running && this.host.room() > 0) void this.loop(false);
  }

  /**
   * Splits a fetch/activate reply; a paused reply carries the newest event id to block after. A
   * 'rated' one carries the ms until the rate limiter lets a job start: the read loop waits that
   * long, then fetches (the status becomes 'limited': fetches, not blocking reads, take the jobs).
   */
  private parseDelivery(r: unknown[]): Delivered {
    const status = String(r[0]);
    if ((status === 'paused') !== this.queuePaused) {
      this.queuePaused = !this.queuePaused;
      this.host.emit(this.queuePaused ? 'queuePaused' : 'queueResumed');
    }
    if (status === 'paused') {
      this.pausedSince = String(r[1] ?? '$');
      return { status, jobs: [] };
    }
    if (status === 'rated') {
      this.rateWaitUntil = performance.now() + Math.max(1, Number(r[1]) || 1);
      return { status: 'limited', jobs: r.slice(2) as ClaimReply[] };
    }
    return { status, jobs: r.slice(1) as ClaimReply[] };
  }

  /**
   * The worker's first fetch, then the loop: blocking reads while slots are free, or a wait for
   * the queue to resume. A queue the worker cannot read yet (a key of the wrong type...) is
   * retried by the read loop with backoff; the worker stays up and reports the error.
   */
  async begin(): Promise<void> {
    const host = this.host;
    let first: Delivered;
    try {
      first = await this.fetch(host.room());
    } catch (err) {
      host.emitError(err);
      first = { status: 'ok', jobs: [] };
    }
    this.limited = first.status === 'limited';
    if (first.status === 'paused') void this.loop(true);
    else this.kick();
  }

  /** Takes one job (in place of a run that parked itself). */
  async fetchOne(): Promise<void> {
    await this.fetch(1);
  }

  /** glidemq_fetch for up to `count` jobs; what it brings is dispatched before it resolves. */
  fetch(count: number): Promise<Delivered> {
    return this.claiming(async () => {
      const host = this.host;
      const r = (await callFunction(host.client(), 'glidemq_fetch', host.keys.meta, [host.consumer, count, ...host.claimTerms])) as unknown[];
      const delivered = this.parseDelivery(r);
      for (const f of delivered.jobs) host.dispatch(f);
      return delivered;
    });
  }

  /**
   * Runs `call`, which may bring claims, counted until it is done (with the dispatch of what it
   * brought), so that close() waits for it and gives back what arrives while it closes: a claim
   * started then could outlive the close, its finish lost with the connection, and the job run
   * again by stalled recovery.
   */
  async claiming<T>(call: () => Promise<T>): Promise<T> {
    this.claimCalls++;
    try {
      return await call();
    } finally {
      this.claimCalls--;
      this.claimsSettled.settle();
    }
  }

  /**
   * For close(), on a live connection: ends a blocking read in flight, then waits (a short while
   * each) until no read, fetch or activation is on its way. The claims they bring are kept, not
   * started (the Worker's dispatch): they go back with the prefetched ones (started, a run could
   * outlive the close, its finish lost with the connection, and the job run again by stalled
   * recovery).
   */
  async stopForClose(): Promise<void> {
    const live = () => this.host.client().status === 'ready';
    if (live()) await within(this.unblock(), CLOSE_CALL_MS);
    if (live()) await within(this.claimsSettled.wait(), CLOSE_CALL_MS);
  }

  /**
   * Turns what a blocking read delivered into claims (glidemq_activate), at most `want`, and runs
   * them; the rest goes back to the queue. Pairs: (entry id, job id).
   */
  async activateDelivered(streamPairs: string[], wakeIds: string[], want = Math.max(0, this.host.room())): Promise<Delivered> {
    const host = this.host;
    const args: (string | number)[] = [host.consumer, want, ...host.claimTerms, wakeIds.join(','), streamPairs.length / 2, ...streamPairs];
    const r = this.parseDelivery((await callFunction(host.client(), 'glidemq_activate', host.keys.meta, args)) as unknown[]);
    this.limited = r.status === 'limited';
    for (const f of r.jobs) host.dispatch(f);
    return r;
  }

  /** The one blocking read: waits for jobs while slots are free; waits out a pause. */
  async loop(startPaused: boolean): Promise<void> {
    if (this.running) return;
    const host = this.host;
    this.running = true;
    let paused = startPaused;
    let failed = false;
    try {
      while (host.live()) {
        if (this.rateWaitUntil > 0) {
          // the rate window is full or the queue held: no job may start before then, so no read
          await this.waitOutRate();
          continue;
        }
        if (paused) {
          await this.reader!.waitForEvent(host.settings.blockTimeout, this.pausedSince);
          if (!host.live()) break;
          const r = await this.fetch(Math.max(0, host.room()));
          paused = r.status === 'paused';
          this.limited = r.status === 'limited';
          this.readFailures = 0;
          continue;
        }
        const want = host.room();
        if (want <= 0) break;
        if (this.limited) {
          paused = (await this.limitedStep(want)) === 'paused';
          continue;
        }
        if (this.hadWork && host.idle()) {
          // every job this worker had is done and nothing waits for it: the queue is drained
          this.hadWork = false;
          host.emit('drained');
        }
        const r = await this.claiming(() => this.readAndActivate(want));
        this.readFailures = 0;
        if (r) paused = r.status === 'paused';
      }
    } catch (err) {
      if (host.live()) {
        failed = true;
        this.readFailures++;
        // NOGROUP: the stream or its group was deleted under us; glidemq_fetch recreates both.
        if (/NOGROUP/.test(String(err))) await this.fetch(0).catch(() => undefined);
        else host.emitError(await nameWrongTypeKey(host.client(), host.keys.meta, err));
        // A lasting fault (a key of the wrong type, a refused command) must not become a busy loop.
        await delay(Math.min(5000, 50 * 2 ** Math.min(this.readFailures, 7)));
      }
    } finally {
      this.running = false;
      this.changes.reset();
    }
    if (host.live() && (failed || (host.room() > 0 && !paused))) this.kick();
  }

  /**
   * One blocking read for up to `want` jobs and the activation of what it delivered (undefined:
   * nothing came).
   */
  private async readAndActivate(want: number): Promise<Delivered | undefined> {
    this.reserved = want;
    let delivered;
    try {
      delivered = await this.reader!.read(want);
    } finally {
      this.reserved = 0;
    }
    if (!delivered) return undefined;
    // A delayed job became the earliest due: promote when it is due, not on the next tick.
    if (delivered.dueIn !== undefined) this.host.promoteBy(delivered.dueIn);
    return this.activateDelivered(delivered.streamPairs, delivered.wakeIds, want);
  }

  /**
   * One step of a worker on a queue with a globalConcurrency limit. Its deliveries happen only
   * inside glidemq_fetch (and glidemq_finish), which check the limit in the same call, so it never
   * holds a claim while waiting for a slot: the stream claims a worker could hold that way (from a
   * blocking XREADGROUP that raced the limit) are handed back by glidemq_activate at once, well
   * within half of min(lockDuration, stalledInterval). With nothing to take it does not spin: it
   * blocks until the queue's streams show something that can free a slot or bring a job.
   */
  private async limitedStep(want: number): Promise<string> {
    const host = this.host;
    await this.changes.mark(host.client());
    const r = await this.fetch(want);
    if (r.status !== 'limited') {
      this.limited = false;
      this.changes.reset();
    } else if (r.jobs.length < want && this.rateWaitUntil === 0) {
      await this.changes.wait(this.reader!.client, host.settings.blockTimeout, host.live);
    }
    return r.status;
  }

  /** Sits out the wait a 'rated' reply asked for, on a timer close() ends. */
  private waitOutRate(): Promise<void> {
    // (a timer holds at most 2^31 - 1 ms: a longer hold is waited out in parts)
    const ms = Math.min(this.rateWaitUntil - performance.now(), 2 ** 31 - 1);
    this.rateWaitUntil = 0;
    if (ms <= 0 || !this.host.live()) return Promise.resolve();
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        this.rateTimer = undefined;
        resolve();
      };
      const timer = setTimeout(end, Math.ceil(ms));
      this.rateTimer = { timer, end };
    });
  }
}
