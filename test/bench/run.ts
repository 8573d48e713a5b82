/**
 * `make bench`: glidemq and BullMQ side by side on a valkey-server this run starts itself.
 *
 *   node dist/test/bench/run.js [--quick] [--rounds N] [--only key,key] [--json FILE] [--markdown]
 *
 * Each round runs every figure for both systems in turn (the order alternates between rounds),
 * with FLUSHALL before each; the table shows the medians of the rounds and glidemq/BullMQ.
 * The net.* rows go through delay proxies in front of the main server (calibrated before the
 * rounds, checked after them: see the notes), tls.c10 to a TLS-only server with fresh certificates.
 */
import { rmSync, writeFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { hasOpenssl, makeCerts, TlsServer, type TestCerts } from '../helpers/tls.js';
import { TestServer } from '../helpers/valkey.js';
import { bullmqOneEnqueue, enqueueAvailable, glidemqOneEnqueue, ndjsonEnqueue, nodeStartMs } from './cli-figures.js';
import { startDelayProxy, type DelayProxy } from './delay-proxy.js';
import { batchAgainstC10, BATCH_SIZE } from './batch-figures.js';
import { tracingAgainstC10 } from './trace-figures.js';
import { FLOW_SIDES, flowAdds, flowEndToEnd, type FlowSizes } from './flow-figures.js';
import { bulkAdds, delayLateness, memoryPerJob, preload, processBacklog, processListened, serialAdds, steadyLatency, type Sizes } from './figures.js';
import { median, sentCommands } from './measure.js';
import { calibrateProxy, describeCalibration, measureProxy, type ProxyCalibration } from './net-probe.js';
import { record, renderMarkdown, renderTable, ROWS, type Results } from './report.js';
import { SYSTEMS, trustTlsCa, type System } from './systems.js';
import { runScale, scaleWanted } from './scale.js';
import { CONFIRM_ROWS, confirmFigures, startConfirmServers, type ConfirmServers } from './confirm-figures.js';

const FULL: Sizes = {
  serialMs: 1000, bulkJobs: 20_000, backlog: 20_000, processMaxMs: 4000, sideBacklog: 10_000, sideMaxMs: 2500,
  latencyMs: 3000, latencyRate: 500, delayJobs: 100,
  memJobs: 20_000, ndjsonLines: 100_000, cliRuns: 5,
};
const QUICK: Sizes = {
  serialMs: 600, bulkJobs: 10_000, backlog: 5_000, processMaxMs: 1500, sideBacklog: 3_000, sideMaxMs: 1000,
  latencyMs: 1500, latencyRate: 500, delayJobs: 50,
  memJobs: 5_000, ndjsonLines: 20_000, cliRuns: 3,
};
/** The flow rows' sizes (test/bench/flow-figures.ts). */
const FLOW_SIZES: Record<'full' | 'quick', FlowSizes> = {
  full: { flows: 2000, flowAddMaxMs: 3000, e2eRuns: 5 },
  quick: { flows: 500, flowAddMaxMs: 1000, e2eRuns: 3 },
};
/** A whole run stops starting rounds once another round would pass this (ms). */
const BUDGET_MS = { full: 9 * 60_000, quick: 2 * 60_000 };
/** Added delay each way (ms) of the proxy rows: another zone's server, and one in the same zone. */
const FAR_MS = 0.5;
const NEAR_MS = 0.1;
const FAR_ROWS = [1, 10, 50].map((c) => `net.c${c}`);
const NEAR_ROW = 'net.c10.near';

interface Args {
  quick: boolean;
  rounds: number;
  only: string[] | undefined;
  json: string | undefined;
  markdown: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { quick: false, rounds: 0, only: undefined, json: undefined, markdown: false };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i];
    if (v === '--quick') a.quick = true;
    else if (v === '--rounds') a.rounds = Number(argv[++i]);
    else if (v === '--only') a.only = argv[++i].split(',');
    else if (v === '--json') a.json = argv[++i];
    else if (v === '--markdown') a.markdown = true;
    else if (v === '--help' || v === '-h') {
      console.log('usage: node dist/test/bench/run.js [--quick] [--rounds N] [--only key,key] [--json FILE] [--markdown]');
      console.log(`figure keys: ${ROWS.map((r) => r.key).join(' ')}`);
      process.exit(0);
    } else throw new Error(`unknown argument "${v}" (see --help)`);
  }
  if (!a.rounds) a.rounds = a.quick ? 1 : 5;
  return a;
}

function log(line: string): void {
  process.stderr.write(line + '\n');
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const sizes = args.quick ? QUICK : FULL;
  const side = { ...sizes, backlog: sizes.sideBacklog, processMaxMs: sizes.sideMaxMs };
  const wanted = (key: string) => !args.only || args.only.some((o) => key.startsWith(o));
  sentCommands.install();
  const results: Results = new Map();
  const notes: string[] = [];
  const breakdown: Record<string, Record<string, number>> = {};
  const started: TestServer[] = [];
  const admins: Redis[] = [];
  const proxies: { proxy: DelayProxy; cal: ProxyCalibration }[] = [];
  let tls: { s: TlsServer; admin: Redis } | undefined;
  let confirmServers: ConfirmServers | undefined;
  let certs: TestCerts | undefined;
  const nodeStarts: number[] = [];
  const server = async (persistence: 'none' | 'aof-everysec' | 'aof-always') => {
    const s = await new TestServer({ persistence }).start();
    started.push(s);
    const admin = s.client();
    sentCommands.exclude(admin);
    admins.push(admin);
    return { s, admin };
  };
  try {
    const main = await server('none');
    const everysec = wanted('dur.') ? await server('aof-everysec') : undefined;
    const always = wanted('dur.') ? await server('aof-always') : undefined;
    // Each proxy is calibrated once, before the rounds, so PING through it takes 2 × its delay longer.
    const proxyFor = async (delayMs: number) => {
      const proxy = await startDelayProxy(main.s.port, delayMs);
      const cal = await calibrateProxy(proxy, main.s.url);
      proxies.push({ proxy, cal });
      return proxy;
    };
    const far = FAR_ROWS.some(wanted) ? await proxyFor(FAR_MS) : undefined;
    const near = wanted(NEAR_ROW) ? await proxyFor(NEAR_MS) : undefined;
    if (wanted('tls.')) {
      if (!hasOpenssl()) notes.push('openssl is not installed: the TLS figure was skipped.');
      else {
        certs = makeCerts();
        trustTlsCa(certs.caCert);
        const s = await new TlsServer(certs).start();
        const admin = s.client();
        tls = { s, admin };
        await admin.connect();
        sentCommands.exclude(admin);
      }
    }
    if (CONFIRM_ROWS.some((r) => wanted(r.key))) confirmServers = await startConfirmServers(server);
    const cliWanted = ['add.ndjson', 'cli.one', 'cli.wall'].some(wanted);
    const cli = cliWanted && enqueueAvailable();
    if (cliWanted && !cli) notes.push('`glidemq enqueue --ndjson` is not on this build yet: the NDJSON and CLI figures were skipped.');

    const t0 = Date.now();
    let roundsRun = 0;
    for (let round = 1; round <= args.rounds; round++) {
      const roundStart = Date.now();
      const order: System[] = round % 2 ? SYSTEMS : [...SYSTEMS].reverse();
      const each = async (key: string, target: { admin: Redis }, fn: (sys: System) => Promise<void>) => {
        if (!wanted(key)) return;
        for (const sys of order) {
          // SYNC: this server frees a flushed dataset in the background by default, which would
          // overlap the next figure and shrink used_memory while it is measured
          await target.admin.flushall('SYNC');
          try {
            await fn(sys);
          } catch (err) {
            log(`  ${key} ${sys.name}: FAILED ${(err as Error).stack ?? String(err)}`);
          }
        }
      };
      const put = (key: string, sys: System, v: number, unit = '') => {
        record(results, key, sys.name, v);
        log(`round ${round} ${key.padEnd(12)} ${sys.name.padEnd(8)} ${v.toFixed(v < 10 ? 2 : 0)} ${unit}`);
      };
      let bullBulk = NaN;
      await each('add.serial', main, async (sys) => put('add.serial', sys, await serialAdds(sys, main.s.url, sizes), 'jobs/s'));
      await each('add.bulk', main, async (sys) => {
        const v = await bulkAdds(sys, main.s.url, sizes);
        if (sys.name === 'BullMQ') bullBulk = v;
        put('add.bulk', sys, v, 'jobs/s');
      });
      if (cli) {
        await each('add.ndjson', main, async (sys) => {
          if (sys.name === 'glidemq') put('add.ndjson', sys, await ndjsonEnqueue(main.s.url, sizes.ndjsonLines), 'jobs/s');
          else put('add.ndjson', sys, Number.isFinite(bullBulk) ? bullBulk : await bulkAdds(sys, main.s.url, sizes), 'jobs/s (addBulk)');
        });
      }
      for (const c of [1, 10, 50]) {
        const costed = c === 10 && wanted('cost.');
        await each(`proc.c${c}`, main, async (sys) => {
          await preload(sys, main.s.url, sizes.backlog);
          const r = await processBacklog(sys, main.s.url, c, sizes, costed ? main.admin : undefined);
          put(`proc.c${c}`, sys, r.rate, `jobs/s (${r.jobs} jobs)`);
          if (r.cost) {
            put('cost.cmds', sys, r.cost.clientCommandsPerJob, 'client commands/job');
            put('cost.cpu', sys, r.cost.cpuUsPerJob, 'server CPU µs/job');
            put('cost.client', sys, r.cost.clientCpuUsPerJob, 'client CPU µs/job');
            put('cost.script', sys, r.cost.scriptUsPerJob, 'script µs/job');
            put('cost.calls', sys, r.cost.serverCallsPerJob, 'server calls/job');
            breakdown[sys.name] = r.cost.sent;
          }
        });
      }
      await each('events.', main, async (sys) => {
        await preload(sys, main.s.url, sizes.backlog);
        const r = await processListened(sys, main.s.url, 10, sizes, main.admin);
        put('events.c10', sys, r.rate, `jobs/s with a QueueEvents (${r.jobs} jobs)`);
        if (r.cost) put('events.cpu', sys, r.cost.cpuUsPerJob, 'server CPU µs/job with a QueueEvents');
      });
      await each('lat.', main, async (sys) => {
        const r = await steadyLatency(sys, main.s.url, sizes);
        put('lat.p50', sys, r.p50, 'ms');
        put('lat.p99', sys, r.p99, 'ms');
      });
      await each('delay.', main, async (sys) => {
        const r = await delayLateness(sys, main.s.url, main.admin, sizes);
        put('delay.p50', sys, r.p50, 'ms late');
        put('delay.p99', sys, r.p99, 'ms late');
      });
      await each('mem.job', main, async (sys) => put('mem.job', sys, await memoryPerJob(sys, main.s.url, main.admin, sizes), 'bytes/job'));
      const flowSizes = FLOW_SIZES[args.quick ? 'quick' : 'full'];
      await each('flow.add', main, async (sys) => {
        const r = await flowAdds(FLOW_SIDES[sys.name], main.s.url, main.admin, flowSizes);
        put('flow.add', sys, r.rate, 'flows/s (a parent and 10 children)');
        put('flow.cpu', sys, r.cpuUsPerFlow, 'server CPU µs/flow');
      });
      await each('flow.e2e', main, async (sys) => put('flow.e2e', sys, await flowEndToEnd(FLOW_SIDES[sys.name], main.s.url, flowSizes), 'ms add -> parent done (100 children)'));
      for (const kind of ['process', 'thread'] as const) {
        const key = `sandbox.${kind}`;
        await each(key, main, async (sys) => {
          await preload(sys, main.s.url, side.backlog);
          const where = kind === 'process' ? 'child processes' : 'worker threads';
          put(key, sys, (await processBacklog(sys, main.s.url, 10, side, undefined, kind)).rate, `jobs/s, a processor file in ${where}`);
        });
      }
      for (const [key, srv] of [['dur.always', always], ['dur.everysec', everysec], ['dur.off', main]] as const) {
        if (!srv) continue;
        await each(key, srv, async (sys) => {
          await preload(sys, srv.s.url, side.backlog);
          put(key, sys, (await processBacklog(sys, srv.s.url, 10, side)).rate, 'jobs/s');
        });
      }
      if (cli) {
        await each('cli.one', main, async (sys) => {
          // A bare Node start right before, so the figure is what the program adds to it.
          const bare = await nodeStartMs(sizes.cliRuns);
          nodeStarts.push(bare);
          const v = sys.name === 'glidemq' ? await glidemqOneEnqueue(main.s.url, sizes.cliRuns) : await bullmqOneEnqueue(main.s.url, sizes.cliRuns);
          put('cli.one', sys, v - bare, `ms over a bare node start (${bare.toFixed(0)} ms)`);
          put('cli.wall', sys, v, 'ms');
        });
      }
      // Processing through the delay proxies: preloaded directly, processed through the proxy.
      const netRows: [string, number, DelayProxy | undefined][] = [
        ...FAR_ROWS.map((key) => [key, Number(key.slice('net.c'.length)), far] as [string, number, DelayProxy | undefined]),
        [NEAR_ROW, 10, near],
      ];
      for (const [key, c, proxy] of netRows) {
        if (!proxy) continue;
        await each(key, main, async (sys) => {
          await preload(sys, main.s.url, side.backlog);
          put(key, sys, (await processBacklog(sys, proxy.url, c, side)).rate, `jobs/s via proxy +${proxy.delayMs} ms`);
        });
      }
      if (tls) {
        const t = tls;
        await each('tls.c10', t, async (sys) => {
          await preload(sys, t.s.url, side.backlog);
          put('tls.c10', sys, (await processBacklog(sys, t.s.url, 10, side)).rate, 'jobs/s over TLS');
        });
      }
      if (wanted('batch.s50')) {
        try {
          const r = await batchAgainstC10(main.s.url, main.admin, sizes);
          record(results, 'batch.s50', 'glidemq', r.batch);
          record(results, 'batch.s50', 'BullMQ', r.c10); // glidemq's own c=10: the row's baseline
          log(`round ${round} batch.s50    glidemq  ${r.batch.toFixed(0)} jobs/s in batches of ${BATCH_SIZE}, against ${r.c10.toFixed(0)} jobs/s at c=10`);
        } catch (err) {
          log(`  batch.s50: FAILED ${(err as Error).stack ?? String(err)}`);
        }
      }
      if (wanted('trace.')) {
        try {
          const r = await tracingAgainstC10(main.s.url, main.admin, sizes, round % 2 === 0);
          // glidemq's own c=10 without the option is the rows' baseline ("BullMQ" column)
          for (const [key, v] of [['trace.off', r.off], ['trace.on', r.on]] as const) {
            record(results, key, 'glidemq', v);
            record(results, key, 'BullMQ', r.base);
          }
          log(`round ${round} trace.       glidemq  ${r.off.toFixed(0)} jobs/s telemetry off, ${r.on.toFixed(0)} on, against ${r.base.toFixed(0)} jobs/s without the option`);
        } catch (err) {
          log(`  trace.: FAILED ${(err as Error).stack ?? String(err)}`);
        }
      }
      if (confirmServers) {
        try {
          // glidemq against itself: the "BullMQ" column holds glidemq unconfirmed on everysec (confirm-figures.ts)
          await confirmFigures(confirmServers, sizes, wanted, (key, v, base) => {
            record(results, key, 'glidemq', v);
            record(results, key, 'BullMQ', base);
            log(`round ${round} ${key.padEnd(12)} glidemq  ${v.toFixed(0)} jobs/s, against ${base.toFixed(0)} jobs/s unconfirmed on everysec`);
          });
        } catch (err) {
          log(`  confirm.: FAILED ${(err as Error).stack ?? String(err)}`);
        }
      }
      roundsRun = round;
      const took = Date.now() - roundStart;
      log(`round ${round} took ${(took / 1000).toFixed(1)} s`);
      if (round < args.rounds && Date.now() - t0 + took > BUDGET_MS[args.quick ? 'quick' : 'full']) {
        notes.push(`stopped after ${round} of ${args.rounds} rounds to stay within the time budget.`);
        break;
      }
    }
    // once, not per round: its fills take minutes (test/bench/scale.ts)
    if (scaleWanted(wanted)) notes.push(...(await runScale({ url: main.s.url, admin: main.admin, quick: args.quick, wanted, results, log })));
    console.log(renderTable(results, roundsRun));
    for (const [name, sent] of Object.entries(breakdown)) {
      const top = Object.entries(sent).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([c, n]) => `${c} ${n}`).join(', ');
      console.log(`client commands during the c=10 run, ${name}: ${top}`);
    }
    if (nodeStarts.length > 0) {
      const ca = process.env.NODE_EXTRA_CA_CERTS ? 'set, so Node parses that CA file at every start' : 'not set';
      notes.push(`a bare \`node -e 0\` took ${median(nodeStarts).toFixed(0)} ms here (median over the rounds; NODE_EXTRA_CA_CERTS ${ca}): that much of each one-job wall time is Node's own start, and the one-job row takes off the bare start timed just before it.`);
    }
    for (const { proxy, cal } of proxies) {
      notes.push(describeCalibration(cal, 'calibrated before the rounds'));
      notes.push(describeCalibration(await measureProxy(proxy, main.s.url, cal.holdMs), 'measured again after them'));
    }
    for (const n of notes) console.log(`note: ${n}`);
    if (args.markdown) console.log('\n' + renderMarkdown(results));
    if (args.json) writeFileSync(args.json, JSON.stringify({ sizes, rounds: roundsRun, results: Object.fromEntries(results), breakdown, notes }, null, 2));
  } finally {
    for (const { proxy } of proxies) await proxy.stop();
    if (tls) {
      tls.admin.disconnect();
      await tls.s.stop();
    }
    if (certs) rmSync(certs.dir, { recursive: true, force: true });
    await confirmServers?.replica.stop();
    for (const a of admins) a.disconnect();
    for (const s of started) await s.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`bench: ${(err as Error).stack ?? String(err)}`);
    process.exit(2);
  },
);
