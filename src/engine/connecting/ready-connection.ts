/**
 * A queue-side object's start-up, made once: its connection settled (a Cluster client once the
 * server proves to be a cluster node) and the library ensured on it. Callers share the start-up in
 * flight; one that failed (the server down at the first call) is forgotten, so the next call
 * tries again. (Queue and QueueEvents start up this way.)
 */
import { settleTopology, type Acquired } from './connection.js';
import { ensureLibrary } from './library.js';

export class ReadyConnection {
  private ready: Promise<void> | undefined;

  constructor(private readonly acquired: Acquired) {}

  /** Resolves once the connection is settled and the library is on the server. */
  get(): Promise<void> {
    if (!this.ready) {
      const ready = settleTopology(this.acquired).then((c) => ensureLibrary(c));
      ready.catch(() => {
        if (this.ready === ready) this.ready = undefined;
      });
      this.ready = ready;
    }
    return this.ready;
  }

  /** Resolves once a start-up in flight has settled, either way (a close then closes what it made). */
  async settled(): Promise<void> {
    await this.ready?.catch(() => undefined);
  }
}
