/**
 * Where the server's time goes for one system's processing run: INFO commandstats per processed
 * job, command by command (commands inside functions/scripts are listed too, and their time is
 * also inside the fcall/evalsha line).
 *
 *   node dist/test/bench/profile.js [glidemq|BullMQ] [concurrency] [jobs]
 *   BENCH_CPU_PROFILE=FILE also writes a V8 CPU profile of the client during the processing only.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { TestServer } from '../helpers/valkey.js';
import { preload, processBacklog, type Sizes } from './figures.js';
import { commandStats, sentCommands } from './measure.js';
import { SYSTEMS } from './systems.js';

async function main(): Promise<void> {
  const [name = 'glidemq', conc = '10', n = '20000'] = process.argv.slice(2);
  const sys = SYSTEMS.find((s) => s.name.toLowerCase() === name.toLowerCase());
  if (!sys) throw new Error(`unknown system "${name}": glidemq or BullMQ`);
  sentCommands.install();
  const server = await new TestServer().start();
  const admin = server.client();
  sentCommands.exclude(admin);
  const sizes = { backlog: Number(n), processMaxMs: 20_000 } as Sizes;
  try {
    await preload(sys, server.url, sizes.backlog);
    const out = process.env.BENCH_CPU_PROFILE;
    const session = out ? new Session() : undefined;
    if (session) {
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
    }
    const r = await processBacklog(sys, server.url, Number(conc), sizes, admin);
    if (session && out) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(out, JSON.stringify(profile));
      session.disconnect();
    }
    const stats = await commandStats(admin);
    console.log(`${sys.name} c=${conc}: ${r.rate.toFixed(0)} jobs/s over ${r.jobs} jobs`);
    console.log(JSON.stringify(r.cost, null, 1));
    const rows = [...stats].filter(([k]) => k !== 'info' && k !== 'config|resetstat').sort((a, b) => b[1].usec - a[1].usec);
    for (const [cmd, st] of rows) {
      console.log(`${cmd.padEnd(24)} calls/job ${(st.calls / r.jobs).toFixed(3).padStart(7)}  µs/job ${(st.usec / r.jobs).toFixed(2).padStart(7)}  µs/call ${(st.usec / st.calls).toFixed(2).padStart(6)}`);
    }
  } finally {
    admin.disconnect();
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(2);
  },
);
