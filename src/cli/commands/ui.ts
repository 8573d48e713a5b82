/** `glidemq ui`: the web dashboard (bull-board over the queues, and the durability audit) until stopped. */
import type { Command } from 'commander';
import { invalid } from '../../engine/shared/errors.js';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { action, describeError, warnUnknownQueue } from '../context.js';
import { untilSignal } from '../signals.js';
import { hangingWrap, plural, print, printJsonLine, warn } from '../output.js';

interface UiFlags {
  port: string;
  host: string;
  auth?: string;
  readOnly?: boolean;
  rediscover: string;
}

export function register(program: Command): void {
  program
    .command('ui [queues...]')
    .description('serve the web dashboard (bull-board) over the queues until stopped')
    .option('-p, --port <port>', 'port to listen on (0: any free port)', '5380')
    .option('--host <host>', 'address to listen on (0.0.0.0: every interface)', '127.0.0.1')
    .option('--auth <user:pass>', 'ask every request for these (default: $GLIDEMQ_UI_AUTH)')
    .option('--read-only', 'hide every action: look, do not touch')
    .option('--rediscover <duration>', 'how often to look for new queues', '5s')
    .addHelpText(
      'after',
      `
Without queue names every queue under the prefix is shown, and a new queue
appears within --rediscover. The durability audit (as glidemq audit) is at /audit.
Bound to an address other than loopback it needs --auth (or GLIDEMQ_UI_AUTH):
every page then asks for the credentials (HTTP basic auth; use TLS in front
of it across a network). SIGINT/SIGTERM stop it (exit 0).

Examples:
  $ glidemq ui
  $ glidemq ui --read-only emails images
  $ GLIDEMQ_UI_AUTH=ops:s3cret glidemq ui --host 0.0.0.0 --port 8080`,
    )
    .action(
      action(async (ctx, queues: string[], flags: UiFlags) => {
        const port = parseInteger(flags.port, '--port', 0, 65_535);
        const rediscover = rediscoverMs(flags.rediscover);
        const authText = flags.auth ?? (process.env.GLIDEMQ_UI_AUTH || undefined);
        const auth = authText === undefined ? undefined : parseBasicAuth(authText);
        if (authText !== undefined && !auth) throw invalid('--auth takes user:pass (a user name, a colon, a password)');
        if (!auth && !isLoopback(flags.host)) {
          throw invalid(`refusing to serve ${flags.host} without credentials: pass --auth user:pass or set GLIDEMQ_UI_AUTH`);
        }
        const { Dashboard } = await loadDashboard();
        let lastError = '';
        const dashboard = new Dashboard(
          {
            // a service: it rides out a server restart (pages meanwhile show the error) instead of exiting
            connection: { ...ctx.connection, options: { ...ctx.connection.options, retryStrategy: (n: number) => Math.min(n * 200, 2000) } },
            prefix: ctx.prefix,
            queues,
            readOnly: !!flags.readOnly,
            rediscoverMs: rediscover,
            ...(auth ? { auth } : {}),
            where: ctx.where,
            // on loopback, only loopback names: a page whose name resolves to 127.0.0.1 cannot read the board
            ...(isLoopback(flags.host) ? { acceptHost: isLoopback } : {}),
          },
          (err) => {
            const why = describeError(err, ctx.where);
            if (why !== lastError) warn(`the dashboard could not read the server: ${why}`);
            lastError = why;
          },
        );
        try {
          await dashboard.connect(ctx.where);
          for (const missing of await dashboard.missingQueues()) warnUnknownQueue(ctx, missing);
          const bound = await dashboard.listen(port, flags.host);
          const url = `http://${flags.host.includes(':') ? `[${flags.host}]` : flags.host}:${bound}/`;
          const shown = queues.length ? plural(queues.length, 'queue') : 'every queue';
          if (ctx.json) printJsonLine({ url, host: flags.host, port: bound, queues: queues.length ? queues : null, auth: !!auth, readOnly: !!flags.readOnly });
          else print(hangingWrap(`dashboard of ${shown} of prefix "${ctx.prefix}" at ${ctx.where} on ${url}${flags.readOnly ? ' (read-only)' : ''}`));
          await untilSignal();
          return 0;
        } finally {
          await dashboard.close();
        }
      }),
    );
}

/** `user:pass` (the first colon splits; the password may hold colons), or undefined when it has no colon or an empty user. */
export function parseBasicAuth(text: string): { user: string; pass: string } | undefined {
  const colon = text.indexOf(':');
  if (colon <= 0) return undefined;
  return { user: text.slice(0, colon), pass: text.slice(colon + 1) };
}

/** Whether `host` is a loopback address, reachable only from this machine. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || h === '::ffff:127.0.0.1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** --rediscover in ms: at least 100 ms (a SCAN of the keyspace each time). */
function rediscoverMs(text: string): number {
  const ms = parseDuration(text, '--rediscover');
  if (ms < 100) throw invalid(`--rediscover must be at least 100ms (each look is a SCAN of the keyspace), not ${text}`);
  return ms;
}

/**
 * The dashboard's module, loaded only here: bull-board and express are optional peer dependencies
 * nothing else needs, so an install without them says what to add instead of a stack.
 */
async function loadDashboard(): Promise<typeof import('../../integrations/bull-board/dashboard.js')> {
  try {
    return await import('../../integrations/bull-board/dashboard.js');
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== 'MODULE_NOT_FOUND' && code !== 'ERR_MODULE_NOT_FOUND') throw err;
    const missing = /'((?:@bull-board\/[a-z-]+)|express|ejs)[/']/.exec((err as Error).message)?.[1] ?? 'a module';
    throw invalid(`glidemq ui needs bull-board and express (${missing} is not installed): npm install @bull-board/api @bull-board/express express`);
  }
}
