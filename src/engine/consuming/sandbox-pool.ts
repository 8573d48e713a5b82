/**
 * A Worker's sandbox children: started as jobs need them, at most one per slot (the worker's
 * concurrency), reused job after job, ended when idle for sandbox.idleMs, replaced when one dies
 * (the next job that needs a child starts a new one), and all ended by close().
 */
import { openChannel, type SandboxChannel } from './sandbox-channel.js';
import type { SandboxSettings } from './sandbox-options.js';
import type { ToParent } from './sandbox-protocol.js';

/** What a run does with its child's messages and its end (sandbox-processor.ts). */
export interface ChildUser {
  message(msg: ToParent): void;
  ended(why: string): void;
}

export class SandboxChild {
  readonly channel: SandboxChannel;
  /** The run this child serves now. */
  user: ChildUser | undefined;
  /** Its runs so far: the number of the current one (a job call names its run). */
  runs = 0;
  /** Whether its module loaded: undefined until it said. */
  loaded: boolean | undefined;
  gone = false;
  idleTimer: NodeJS.Timeout | undefined;
  /** Resolves once the child has ended. */
  readonly ended: Promise<void>;

  constructor(settings: SandboxSettings, onEnded: (child: SandboxChild, why: string) => void) {
    let resolveEnded!: () => void;
    this.ended = new Promise((resolve) => (resolveEnded = resolve));
    this.channel = openChannel(settings, {
      message: (msg) => {
        if (msg.t === 'ready') this.loaded = true;
        else if (msg.t === 'load') this.loaded = false;
        if (this.user) this.user.message(msg);
        else if (msg.t === 'call') this.refuse(msg.n, msg.op);
      },
      ended: (why) => {
        this.gone = true;
        onEnded(this, why);
        resolveEnded();
      },
    });
  }

  /**
   * Answers a job call made when its run was over (a processor's timer after it returned): it must
   * not reach the next job's Job.
   */
  refuse(n: number, op: string): void {
    this.channel.send({ t: 'reply', n, e: { name: 'Error', message: `job call ${op} refused: the sandboxed run that made it is over` } });
  }
}

export class SandboxPool {
  private readonly children = new Set<SandboxChild>();
  private readonly idle: SandboxChild[] = [];
  private readonly waiting: { resolve(child: SandboxChild): void; reject(err: Error): void }[] = [];
  private closed = false;
  /**
   * Kills the children when this process exits without closing the worker (a second Ctrl-C, an
   * uncaught error): an idle child would leave on its own once its channel closes, but one stuck in
   * a loop never reads that.
   */
  private readonly killAll = (): void => {
    for (const child of this.children) child.channel.kill();
  };

  constructor(readonly settings: SandboxSettings) {}

  /** A child to run one job on: an idle one, a new one while below the size, else the next freed. */
  acquire(): SandboxChild | Promise<SandboxChild> {
    if (this.closed) throw this.closedError();
    const child = this.idle.pop();
    if (child) {
      clearTimeout(child.idleTimer);
      return child;
    }
    if (this.children.size < this.settings.size) return this.start();
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  /**
   * Starts a child (unless one is idle) and resolves once it has loaded the processor module; rejects
   * with why it could not (the module's path, and "cannot be loaded: ..." or "exports no function").
   * The child then waits for the first job. For a caller that wants a bad module refused up front.
   */
  async warm(): Promise<void> {
    const child = await this.acquire();
    if (child.loaded === true) return this.release(child);
    try {
      await new Promise<void>((resolve, reject) => {
        child.user = {
          message: (msg) => {
            if (msg.t === 'ready') resolve();
            else if (msg.t === 'load') reject(new Error(msg.e.message));
          },
          ended: (why) => reject(new Error(`${this.settings.path}: its sandbox ${child.channel.label} ${why} while loading it`)),
        };
        if (child.loaded === false) reject(new Error(`${this.settings.path} cannot be loaded`));
      });
    } catch (err) {
      this.discard(child);
      throw err;
    }
    this.release(child);
  }

  /**
   * Starts children up to the pool's size, all at once, and resolves once each has said whether
   * its module loaded, or ended. Never rejects: a child whose module failed to load waits idle
   * like the others, and the job it is given fails saying why (as a child started for a job
   * does). A job that asks for a child meanwhile gets the first one that is done loading.
   */
  fill(): Promise<void> {
    const loading: Promise<void>[] = [];
    while (!this.closed && this.children.size < this.settings.size) {
      const child = this.start();
      loading.push(
        new Promise<void>((resolve) => {
          child.user = {
            message: (msg) => {
              if (msg.t === 'ready' || msg.t === 'load') resolve();
            },
            ended: () => resolve(),
          };
        }).then(() => {
          if (!child.gone) this.release(child);
        }),
      );
    }
    return Promise.all(loading).then(() => undefined);
  }

  /** A child whose run is over, healthy: it serves the next job. */
  release(child: SandboxChild): void {
    child.user = undefined;
    if (child.gone) return;
    if (this.closed) return child.channel.kill();
    const next = this.waiting.shift();
    if (next) return next.resolve(child);
    this.idle.push(child);
    const idleMs = this.settings.idleMs;
    if (idleMs !== undefined) child.idleTimer = setTimeout(() => this.endIdle(child), idleMs);
  }

  /** A child that cannot serve again (a load failure, a run abandoned after an abort): ended. */
  discard(child: SandboxChild): void {
    child.user = undefined;
    child.channel.kill();
  }

  /** The process ids of the children alive now (a thread's is this process's). */
  pids(): number[] {
    return [...this.children].map((c) => c.channel.pid);
  }

  get size(): number {
    return this.children.size;
  }

  /** Ends every child, idle or running, and resolves once all have ended. */
  async close(): Promise<void> {
    this.closed = true;
    process.off('exit', this.killAll);
    for (const w of this.waiting.splice(0)) w.reject(this.closedError());
    const all = [...this.children];
    for (const child of all) {
      clearTimeout(child.idleTimer);
      child.channel.kill();
    }
    await Promise.all(all.map((c) => c.ended));
  }

  private closedError(): Error {
    return new Error(`the worker closed: its sandbox of ${this.settings.path} runs no more jobs`);
  }

  private start(): SandboxChild {
    const child = new SandboxChild(this.settings, (c, why) => this.onEnded(c, why));
    if (this.children.size === 0) process.on('exit', this.killAll);
    this.children.add(child);
    return child;
  }

  private endIdle(child: SandboxChild): void {
    const at = this.idle.indexOf(child);
    if (at < 0) return;
    this.idle.splice(at, 1);
    child.channel.kill();
  }

  /** A child ended (killed, crashed, idle): its run hears why, and a job waiting for a child gets a new one. */
  private onEnded(child: SandboxChild, why: string): void {
    this.children.delete(child);
    if (this.children.size === 0) process.off('exit', this.killAll);
    clearTimeout(child.idleTimer);
    const at = this.idle.indexOf(child);
    if (at >= 0) this.idle.splice(at, 1);
    const user = child.user;
    child.user = undefined;
    user?.ended(why);
    if (!this.closed && this.waiting.length > 0) this.waiting.shift()!.resolve(this.start());
  }
}
