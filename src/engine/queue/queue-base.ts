/**
 * What every side of a queue stands on (as BullMQ's QueueBase): its name and keys, the connection
 * (a Cluster client once the server proves to be a cluster node), the library made ready on it,
 * one function call, and the server's clock.
 */
import { acquireClient, closeClient, type Acquired, type ConnectionInput, type Client } from '../connecting/connection.js';
import { QueueKeys, DEFAULT_PREFIX } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';
import { ReadyConnection } from '../connecting/ready-connection.js';
import { SafeEmitter } from '../shared/safe-emitter.js';

/** An event emitter as Worker is: a listener that throws arrives as `error` (see SafeEmitter). */
export class QueueBase extends SafeEmitter {
  readonly keys: QueueKeys;
  private readonly acquired: Acquired;
  private readonly ready: ReadyConnection;

  constructor(
    readonly name: string,
    opts: { connection?: ConnectionInput; prefix?: string },
  ) {
    super();
    this.keys = new QueueKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    this.acquired = acquireClient(opts.connection);
    this.ready = new ReadyConnection(this.acquired);
  }

  /** The connection; a Cluster client once waitUntilReady() found the server is a cluster node. */
  get client(): Client {
    return this.acquired.client;
  }

  /** Resolves once the library is on the server (also re-ensured on every reconnect). */
  waitUntilReady(): Promise<void> {
    return this.ready.get();
  }

  protected async call(fn: string, args: (string | number)[]): Promise<unknown> {
    await this.waitUntilReady();
    return callFunction(this.client, fn, this.keys.meta, args);
  }

  /** The server's clock (TIME), in ms: the `now` of anything this queue compares with a stored time. */
  async serverTime(): Promise<number> {
    await this.waitUntilReady();
    const [s, us] = await this.client.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  /** Resolves once a start-up in flight has settled, either way (close then closes what it made). */
  protected async startupSettled(): Promise<void> {
    await this.ready.settled();
  }

  /** Closes the connection when this queue made it (a client the caller gave stays open). */
  protected async closeConnection(): Promise<void> {
    if (this.acquired.owned) await closeClient(this.client);
  }
}
