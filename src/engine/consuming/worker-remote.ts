/**
 * The Worker's ear for requests from afar: an operator asks a worker, through the worker registry
 * on the server (Queue.quietWorker / stopWorker, `glidemq workers --quiet|--stop <id>`), to take
 * no new jobs ('quiet') or to finish its running jobs and close ('stop'). The registry's refresh
 * reply carries the request (worker-registry.ts), so it is heard within one refresh, with no call
 * of its own. Each request is obeyed once: the entry keeps saying it at every refresh after.
 *
 * Events: quietRequested (then the worker pauses, its running jobs going on: Worker.pause(true)),
 * stopRequested (then the worker closes gracefully: Worker.close()).
 */
import type { WorkerRequest } from './worker-registry.js';

/** What the ear needs of its worker. */
export interface RemoteHost {
  emit(event: string, ...args: unknown[]): void;
  /** Takes no new jobs; running ones go on. */
  quiet(): Promise<void>;
  /** Finishes the running jobs and closes. */
  stop(): Promise<void>;
  emitError(err: unknown): void;
}

export class RemoteRequests {
  private heard: WorkerRequest | undefined;

  constructor(private readonly host: RemoteHost) {}

  /** The last request obeyed, if any. */
  get request(): WorkerRequest | undefined {
    return this.heard;
  }

  /** A refresh found `request`: obeyed unless it was already (a stop is never undone by a quiet). */
  hear(request: WorkerRequest): void {
    if (this.heard === request || this.heard === 'stop') return;
    this.heard = request;
    const host = this.host;
    if (request === 'quiet') {
      host.emit('quietRequested');
      host.quiet().catch((err) => host.emitError(err));
    } else {
      host.emit('stopRequested');
      host.stop().catch((err) => host.emitError(err));
    }
  }
}
