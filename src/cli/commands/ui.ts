/** `glidemq ui`: the web dashboard (bull-board over the queues, and the durability audit) until stopped. */
import { Option, type Command } from 'commander';
import { invalid } from '../../engine/shared/errors.js';
import { parseInteger } from '../../engine/shared/duration.js';
import { action, describeError, warnUnknownQueue } from '../context.js';
import { untilSignal } from '../signals.js';
import { plural, print, printJsonLine, warn } from '../output.js';

interface UiFlags {
  port: string;
  host: string;
  auth?: string;
  readOnly?: boolean;
  rediscoverMs?: string;
}

export function register(program: Command): void {
  program
    .command('ui [queues...]')
    .description('serve the web dashboard (bull-board) over the queues until stopped')
    .option('-p, --port <port>', 'port to listen on (0: any free port)', '5380')
    .option('--host <host>', 'address to listen on (0.0.0.0: every interface)', '127.0.0.1')
    .option('--auth <user:pass>', 'ask for these credentials (default $GLIDEMQ_UI_AUTH)')
    .option('--read-only', 'hide every action: look, do not touch')
    // how often the queue list is looked up again (tests make it short)
    .addOption(new Option('--rediscover-ms <ms>').hideHelp())
    .addHelpText(
      'after',
      `
Without queue names every queue under the prefix is shown, and a new queue
appears within 5 s. The durability audit (as glidemq audit) is at /audit.
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
        const authText = flags.auth ?? (process.env.GLIDEMQ_UI_AUTH || undefined);
        // loaded only here: bull-board and express are optional peers nothing else needs
        const { Dashboard, isLoopback, parseBasicAuth } = await import('../../integrations/bull-board/dashboard.js');
        const auth = authText === undefined ? undefined : parseBasicAuth(authText);
        if (authText !== undefined && !auth) throw invalid('--auth takes user:pass (a user name, a colon, a password)');
        if (!auth && !isLoopback(flags.host)) {
          throw invalid(`refusing to serve ${flags.host} without credentials: pass --auth user:pass or set GLIDEMQ_UI_AUTH`);
        }
        let lastError = '';
        const dashboard = new Dashboard(
          {
            // a service: it rides out a server restart (pages meanwhile show the error) instead of exiting
            connection: { ...ctx.connection, options: { ...ctx.connection.options, retryStrategy: (n: number) => Math.min(n * 200, 2000) } },
            prefix: ctx.prefix,
            queues,
            readOnly: !!flags.readOnly,
            ...(flags.rediscoverMs ? { rediscoverMs: parseInteger(flags.rediscoverMs, '--rediscover-ms', 10, 3_600_000) } : {}),
            ...(auth ? { auth } : {}),
            where: ctx.where,
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
          else print(`dashboard of ${shown} of prefix "${ctx.prefix}" at ${ctx.where} on ${url}${flags.readOnly ? ' (read-only)' : ''}`);
          await untilSignal();
          return 0;
        } finally {
          await dashboard.close();
        }
      }),
    );
}
