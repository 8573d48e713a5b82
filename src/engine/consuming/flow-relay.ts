/**
 * The Worker's flow relay: after a finish reply that reports an outbox record (a child of this
 * queue settled a parent in another queue, lua/flow-keys.lua), it relays the queue's outbox at
 * once, off the job's path (the run is over; the relay is its own calls). It is given the relay
 * function (producing/flow-outbox.ts relayOutbox), so it knows nothing of flows. A relay asked
 * for while one runs runs once more after it; a failed relay is reported, and maintenance relays
 * the records it left once they are older than the grace period.
 */
import type { Client } from '../connecting/connection.js';
import type { WorkerPart } from './worker-part.js';

/** Relays the outbox of the queue of `metaKey`: records at least `minAgeMs` old (server clock). */
export type OutboxRelay = (client: Client, metaKey: string, minAgeMs: number) => Promise<number>;

export class FlowRelay {
  private running = false;
  private again = false;
  private idle: Promise<void> = Promise.resolve();

  constructor(
    private readonly host: Pick<WorkerPart, 'client' | 'keys' | 'emitError'>,
    private readonly relay: OutboxRelay,
  ) {}

  /** A finish reported an outbox record: relay now (or once more after the relay that runs). */
  kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.idle = this.run();
  }

  /** Resolves once no relay runs (close waits for it, so a relay is not cut by the connection closing). */
  settled(): Promise<void> {
    return this.idle;
  }

  private async run(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.relay(this.host.client(), this.host.keys.meta, 0);
      } catch (err) {
        this.host.emitError(err);
      }
    } while (this.again);
    this.running = false;
  }
}
