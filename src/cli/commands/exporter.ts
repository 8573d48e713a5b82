/** `glidemq exporter`: serves the queues' metrics in the Prometheus text format over HTTP. */
import type { Command } from 'commander';
import { parseDuration, parseInteger } from '../../engine/shared/duration.js';
import { invalid } from '../../engine/shared/errors.js';
import { runAudit } from '../../audit/audit.js';
import { verdictsByNode } from '../../audit/verdicts.js';
import { LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION } from '../../engine/connecting/library.js';
import { PrometheusExporter } from '../../engine/operating/prometheus-exporter.js';
import { action, describeError, warnUnknownQueue } from '../context.js';
import { untilSignal } from '../signals.js';
import { plural, print, printJsonLine, warn } from '../output.js';

interface ExporterFlags {
  port: string;
  host: string;
  audit?: boolean | string;
  downStatus?: string;
}

/** How often `--audit` runs the audit when no interval is given. */
const DEFAULT_AUDIT_INTERVAL = '60s';

export function register(program: Command): void {
  program
    .command('exporter [queues...]')
    .description('serve the queues\' metrics for Prometheus at http://<host>:<port>/metrics until stopped')
    .requiredOption('-p, --port <port>', 'port to listen on (0: any free port, printed at start)')
    .option('--host <host>', 'address to listen on (0.0.0.0: every interface)', '127.0.0.1')
    .option('--audit [every]', `publish glidemq_durable_writes per node from glidemq audit, run at start, then each <every> (default: ${DEFAULT_AUDIT_INTERVAL})`)
    .option('--down-status <code>', 'HTTP status of a scrape that cannot read the server: 503, or 200 so Prometheus keeps glidemq_up 0', '503')
    .addHelpText(
      'after',
      `
Without queue names every queue under the prefix is exported, looked up again at each scrape.
Per queue: glidemq_job_count{state} (as glidemq stats), glidemq_job_completed_24h and
glidemq_job_failed_24h (attempts in the last 24 hours, from the per-minute metrics),
glidemq_job_processing_seconds_avg, glidemq_oldest_waiting_seconds, glidemq_workers and
glidemq_queue_paused; kept on the server for good (rate() works): glidemq_jobs_completed_total,
glidemq_jobs_failed_total and the histogram glidemq_job_processing_seconds{outcome}. The
exporter's own: glidemq_up (1: this scrape read the server) and glidemq_scrape_errors_total; with
--audit, glidemq_durable_writes{node,role} (1: the audit fails no check on the node). A scrape the
server cannot answer gets HTTP 503 (--down-status) whose first line names the server and what
failed, then glidemq_up 0; any path but /metrics gets 404. SIGINT/SIGTERM stop it (exit 0). The start line says where it listens
(--json: one JSON object, {url, host, port, queues}).

Examples:
  $ glidemq exporter --port 9464
  $ glidemq exporter --port 9464 --host 0.0.0.0 emails images
  $ curl -s localhost:9464/metrics | grep glidemq_job_count`,
    )
    .action(
      action(async (ctx, queues: string[], flags: ExporterFlags) => {
        const port = parseInteger(flags.port, '--port', 0, 65_535);
        const downStatus = parseInteger(flags.downStatus ?? '503', '--down-status', 200, 503);
        if (downStatus !== 200 && downStatus !== 503) throw invalid('--down-status must be 503 or 200');
        const auditEvery = flags.audit === undefined ? undefined : parseDuration(typeof flags.audit === 'string' ? flags.audit : DEFAULT_AUDIT_INTERVAL, '--audit');
        if (auditEvery !== undefined && auditEvery < 1000) throw invalid('--audit: the interval must be at least 1s (the audit reads every node)');
        let lastAuditError = '';
        const exporter = new PrometheusExporter({
          // a service: it rides out a server restart (a scrape meanwhile gets 503) instead of exiting
          connection: { ...ctx.connection, options: { ...ctx.connection.options, retryStrategy: (n: number) => Math.min(n * 200, 2000) } },
          prefix: ctx.prefix,
          queues,
          downStatus,
          durability:
            auditEvery === undefined
              ? undefined
              : {
                  intervalMs: auditEvery,
                  check: async () =>
                    verdictsByNode(await runAudit(ctx.connection, { expectedLibraryVersion: LIBRARY_VERSION, packageVersion: LIBRARY_PACKAGE_VERSION })),
                  onError: (err) => {
                    const why = describeError(err, ctx.where);
                    if (why !== lastAuditError) warn(`the audit failed: ${why}`);
                    lastAuditError = why;
                  },
                },
        });
        let lastError = '';
        try {
          await exporter.connect(ctx.where);
          for (const missing of await exporter.missingQueues()) warnUnknownQueue(ctx, missing);
          const bound = await exporter.listen(port, flags.host, (err) => {
            const why = describeError(err, ctx.where);
            if (why !== lastError) warn(`a scrape failed: ${why}`); // once per kind of failure, not per scrape
            lastError = why;
          }, (err) => describeError(err, ctx.where));
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
