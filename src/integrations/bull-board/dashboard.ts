/**
 * The server behind `glidemq ui`: bull-board (through `@bull-board/express`) over the queues of a
 * prefix on one connection, with the durability audit at /audit (HTML) and /audit.json.
 *
 * Every queue under the prefix is shown, found again by the engine's queue set every
 * `rediscoverMs` so a queue that appears later shows up without a restart (named queues: those
 * only). With `auth`, every route answers 401 without the right basic-auth credentials; with
 * `readOnly`, bull-board hides every action (and its API refuses them).
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createBullBoard } from '@bull-board/api';
import { ExpressAdapter } from '@bull-board/express';
import { runAudit } from '../../audit/audit.js';
import type { ClientSettings } from '../../engine/connecting/connection-input.js';
import { acquireClient, closeClient, settleTopology, waitReady, type Acquired } from '../../engine/connecting/connection.js';
import { LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION } from '../../engine/connecting/library.js';
import { QueueSet } from '../../engine/operating/queue-set.js';
import { GlideMQAdapter } from './adapter.js';
import { auditPage } from './audit-page.js';
import { closeHttpServer, listenHttpServer } from '../../engine/shared/http-server.js';

export interface BasicAuth {
  user: string;
  pass: string;
}

export interface DashboardOptions {
  connection: ClientSettings;
  prefix: string;
  /** The queues to show; none: every queue under the prefix. */
  queues?: string[];
  readOnly?: boolean;
  auth?: BasicAuth;
  /** How often the queue list is looked up again (ms; default 5000). */
  rediscoverMs?: number;
  /** The server's name in messages and on the audit page (its URL without a password). */
  where?: string;
  /**
   * Which Host headers are answered (default: any). A board on loopback accepts only loopback
   * names, so a web page whose own name resolves to 127.0.0.1 (DNS rebinding) cannot read it.
   */
  acceptHost?: (hostname: string) => boolean;
}

/** Compares two secrets in a time that does not depend on where they differ. */
function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}

function authorized(req: IncomingMessage, auth: BasicAuth): boolean {
  const m = /^Basic\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  if (!m) return false;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':'); // the first colon splits: a password may hold colons
  if (colon < 0) return false;
  // both compared, whatever the first says: no early answer to time
  const user = sameSecret(text.slice(0, colon), auth.user);
  const pass = sameSecret(text.slice(colon + 1), auth.pass);
  return user && pass;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

export class Dashboard {
  private readonly acquired: Acquired;
  private set: QueueSet | undefined;
  private server: Server | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly adapters = new Map<string, GlideMQAdapter>();
  private board: ReturnType<typeof createBullBoard> | undefined;
  private app: Handler | undefined;
  private shown = '';

  constructor(
    private readonly opts: DashboardOptions,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.acquired = acquireClient(opts.connection);
  }

  /** Connects (one line naming `label` when the server does not answer in time) and reads the queue list once. */
  async connect(label: string, timeoutMs = 5000): Promise<void> {
    const client = await settleTopology(this.acquired);
    await waitReady(client, label, timeoutMs);
    this.set ??= new QueueSet(client, this.opts.prefix, this.opts.queues);
    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath('/');
    this.board = createBullBoard({
      queues: [],
      serverAdapter,
      options: {
        uiConfig: {
          boardTitle: 'glidemq',
          miscLinks: [{ text: 'Durability audit', url: '/audit' }],
        },
      },
    });
    this.app = serverAdapter.getRouter() as Handler;
    await this.refresh();
  }

  /** The named queues nothing ever used (no meta hash): a typo, usually. Writes nothing. */
  missingQueues(): Promise<string[]> {
    return this.queues.missing();
  }

  /** The queue names on the board now. */
  get queueNames(): string[] {
    return [...this.adapters.keys()];
  }

  private get queues(): QueueSet {
    if (!this.set) throw new Error('the dashboard is not connected: call connect() first');
    return this.set;
  }

  /** Looks the queue list up again and puts every queue found on the board (the board changes only when the list did). */
  async refresh(): Promise<void> {
    const names = [...(await this.queues.names())].sort();
    const key = names.join('\n');
    if (key === this.shown && this.adapters.size === names.length) return;
    for (const name of names) {
      if (!this.adapters.has(name)) this.adapters.set(name, new GlideMQAdapter(this.queues.get(name), { readOnlyMode: !!this.opts.readOnly }));
    }
    for (const [name, adapter] of this.adapters) {
      if (!names.includes(name)) {
        this.adapters.delete(name);
        await adapter.close();
      }
    }
    this.board!.replaceQueues(names.map((n) => this.adapters.get(n)!));
    this.shown = key;
  }

  /** Serves the board on `host`:`port` (0: any free port); resolves with the port once it listens. */
  listen(port: number, host: string): Promise<number> {
    const rediscoverMs = this.opts.rediscoverMs ?? 5000;
    this.timer = setInterval(() => {
      this.refresh().catch((err: unknown) => this.onError(err));
    }, rediscoverMs);
    this.timer.unref();
    const server = createServer((req, res) => this.handle(req, res));
    this.server = server;
    return listenHttpServer(server, port, host);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const refusal = this.refusal(req);
    if (refusal) {
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' }).end(`${refusal}\n`);
      return;
    }
    if (this.opts.auth && !authorized(req, this.opts.auth)) {
      res.writeHead(401, { 'content-type': 'text/plain; charset=utf-8', 'www-authenticate': 'Basic realm="glidemq", charset="UTF-8"' });
      res.end('credentials required\n');
      return;
    }
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/audit' || path === '/audit.json') {
      this.serveAudit(path === '/audit.json', res);
      return;
    }
    this.app!(req, res);
  }

  /**
   * Why a request is refused before anything else, if it is: a Host this board does not answer
   * to, or a change sent from another site's page (its Origin is not this board's).
   */
  private refusal(req: IncomingMessage): string | undefined {
    const host = req.headers.host ?? '';
    const hostname = host.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
    if (this.opts.acceptHost && !this.opts.acceptHost(hostname)) return `this dashboard does not answer to the name ${host || '(none)'}`;
    const origin = req.headers.origin;
    if (req.method !== 'GET' && req.method !== 'HEAD' && origin !== undefined) {
      let from = '';
      try {
        from = new URL(origin).host;
      } catch {
        // an Origin that is not a URL ("null") is another site's
      }
      if (from !== host) return 'a change from another site\'s page is refused';
    }
    return undefined;
  }

  private serveAudit(json: boolean, res: ServerResponse): void {
    runAudit(this.opts.connection, { expectedLibraryVersion: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION }).then(
      (report) => {
        if (json) res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(`${JSON.stringify(report)}\n`);
        else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(auditPage(report, this.opts.where ?? 'the server'));
      },
      (err: unknown) => {
        this.onError(err);
        res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end(`the audit could not run: ${(err as Error)?.message ?? String(err)}\n`);
      },
    );
  }

  /** Stops serving (open connections are closed), then closes the queues and the connection. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    const server = this.server;
    this.server = undefined;
    if (server) await closeHttpServer(server);
    await Promise.all([...this.adapters.values()].map((a) => a.close()));
    this.adapters.clear();
    await this.set?.close();
    if (this.acquired.owned) await closeClient(this.acquired.client);
  }
}
