/**
 * Takes back the claims a worker's consumer holds but the worker does not know: the reply that
 * carried them was lost (lua/own-claims.lua says how that happens). After any of the worker's
 * connections comes back, the worker lists what its consumer holds and takes back the rest: active
 * claims as they are (same fence, lock renewed), and entries a lost blocking read delivered
 * through glidemq_activate. So a job claimed by a call whose reply was lost runs as soon as the
 * worker is connected again, and is not left to stalled recovery, which would count a stall for
 * a job that never ran. (A worker that dies before it reconnects leaves them to stalled recovery.)
 *
 * Ordering: ioredis writes the calls it re-sends before it announces `ready`, so the listing runs
 * after them and lists what they claimed too; those claims also come back in their replies.
 * glidemq_adopt takes only claims still held with the listed fence, and the worker drops a claim
 * it already holds with the same fence (Worker.dispatch), so whichever arrives second is dropped
 * and no job runs twice.
 */
import type { Client } from '../connecting/connection.js';
import type { ClaimReply } from '../jobs/job.js';
import type { QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';

/** Entries and list claims looked at per recovery (glidemq_ownClaims limit). */
const LIMIT = 10000;

export interface RecoveryHost {
  client(): Client;
  readonly keys: QueueKeys;
  readonly consumer: string;
  /** Whether the worker runs or holds this claim of the job (running, finishing or prefetched). */
  knows(id: string, fence: string): boolean;
  /** Hands claims to the worker as a fetch would. */
  dispatch(replies: ClaimReply[]): void;
  /** Activates job stream entries delivered to the consumer: pairs (entry id, job id). */
  activate(streamPairs: string[]): Promise<void>;
  /** False once the worker closes. */
  running(): boolean;
  emitError(err: unknown): void;
}

export class ClaimRecovery {
  private readonly detach: (() => void)[] = [];
  private busy = false;
  private again = false;
  /** Recoveries run, active claims adopted, delivered entries activated (for tests and stats). */
  readonly stats = { runs: 0, adopted: 0, activated: 0 };

  constructor(private readonly host: RecoveryHost) {}

  /** Recovers after each reconnect of `client` (a connection that closed and is ready again). */
  watch(client: Client): void {
    let lost = false;
    const onClose = () => {
      lost = true;
    };
    const onReady = () => {
      if (!lost) return;
      lost = false;
      void this.recover();
    };
    client.on('close', onClose);
    client.on('ready', onReady);
    this.detach.push(() => {
      client.off('close', onClose);
      client.off('ready', onReady);
    });
  }

  stop(): void {
    for (const d of this.detach.splice(0)) d();
  }

  /** One recovery; a reconnect during it runs another right after. */
  async recover(): Promise<void> {
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    try {
      do {
        this.again = false;
        if (this.host.running()) await this.once();
      } while (this.again);
    } catch (err) {
      this.host.emitError(err);
    } finally {
      this.busy = false;
    }
  }

  private async once(): Promise<void> {
    const { keys, consumer } = this.host;
    const listed = (await callFunction(this.host.client(), 'glidemq_ownClaims', keys.meta, [consumer, LIMIT])) as string[];
    const adopt: string[] = [];
    const delivered: string[] = [];
    for (let i = 0; i + 2 < listed.length; i += 3) {
      const [id, fence, entry] = [String(listed[i]), String(listed[i + 1]), String(listed[i + 2])];
      if (this.host.knows(id, fence)) continue;
      if (fence === '') delivered.push(entry, id);
      else adopt.push(id, fence);
    }
    this.stats.runs++;
    if (adopt.length > 0 && this.host.running()) {
      const replies = (await callFunction(this.host.client(), 'glidemq_adopt', keys.meta, [consumer, adopt.length / 2, ...adopt])) as ClaimReply[];
      this.stats.adopted += replies.length;
      this.host.dispatch(replies);
    }
    if (delivered.length > 0 && this.host.running()) {
      this.stats.activated += delivered.length / 2;
      await this.host.activate(delivered);
    }
  }
}
