/** `glidemq exporter`: serves the queues' metrics in the Prometheus text format over HTTP. */
import type { Command } from 'commander';
import { parseInteger } from '../../engine/shared/duration.js';
import { PrometheusExporter } from '../../engine/operating/prometheus-exporter.js';
import { action, describeError, warnUnknownQueue } from '../context.js';
import { untilSignal } from '../signals.js';
import { plural, print, printJsonLine, warn } from '../output.js';

interface ExporterFlags {
  port: string;
  host: string;
}

export function register(program: Command): void {
  program
    .command('exporter [queues...]')
    .description('serve the queues\' metrics for Prometheus at http://<host>:<port>/metrics until stopped')
    .requiredOption('-p, --port <port>', 'port to listen on (0: any free port, printed at start)')
    .option('--host <host>', 'address to listen on (0.0.0.0: every interface)', '127.0.0.1')
    .addHelpText(
      'after',
      `
Without queue names every queue under the prefix is exported, looked up again at each scrape.
Per queue: glidemq_job_count{state} (as glidemq stats), glidemq_job_completed_24h and
glidemq_job_failed_24h (attempts in the last 24 hours, from the per-minute metrics),
glidemq_job_processing_seconds_avg, glidemq_oldest_waiting_seconds, glidemq_workers and
glidemq_queue_paused. A scrape the server cannot answer gets HTTP 503 with the reason; any path
but /metrics gets 404. SIGINT/SIGTERM stop it (exit 0). The start line says where it listens
(--json: one JSON object, {url, host, port, queues}).

Examples:
  $ glidemq exporter --port 9464
  $ glidemq exporter --port 9464 --host 0.0.0.0 emails images
  $ curl -s localhost:9464/metrics | grep glidemq_job_count`,
    )
    .action(
      action(async (ctx, queues: string[], flags: ExporterFlags) => {
        const port = parseInteger(flags.port, '--port', 0, 65_535);
        const exporter = new PrometheusExporter({
          // a service: it rides out a server restart (a scrape meanwhile gets 503) instead of exiting
          connection: { ...ctx.connection, options: { ...ctx.connection.options, retryStrategy: (n: number) => Math.min(n * 200, 2000) } },
          prefix: ctx.prefix,
          queues,
        });
        let lastError = '';
        try {
          await exporter.connect(ctx.where);
          for (const missing of await exporter.missingQueues()) warnUnknownQueue(ctx, missing);
          const bound = await exporter.listen(port, flags.host, (err) => {
            const why = describeError(err, ctx.where);
            if (why !== lastError) warn(`a scrape failed: ${why}`); // once per kind of failure, not per scrape
            lastError = why;
          });
          const url = `http://${flags.host.includes(':') ? `[${flags.host}]` : flags.host}:${bound}/metrics`;
          if (ctx.json) printJsonLine({ url, host: flags.host, port: bound, queues: queues.length ? queues : null });
          else print(`serving ${queues.length ? plural(queues.length, 'queue') : 'every queue'} of prefix "${ctx.prefix}" at ${ctx.where} on ${url}`);
          await untilSignal();
          return 0;
        } finally {
          await exporter.close();
        }
      }),
    );
}
