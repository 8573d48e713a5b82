/**
 * Runs the function fuzz outside mocha and prints what it found, grouped by function and failure
 * kind, with the distinct error shapes and the keys that refused calls changed: a work list for
 * whoever is making the Lua functions check their input. Exits 1 when there are failures.
 *   npm run build && node dist/test/tools/fuzz-report.js [--calls N] [--batches N] [--seed N] [--only name,name]
 * --calls: random calls per batch (default 3000; each batch also makes its systematic calls);
 * --only: fuzz only these functions (glidemq_ prefix optional).
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { FailureLog, hasTemplate, loadLibraryFunctions, runFuzzBatch } from '../helpers/fuzz.js';
import { TestServer } from '../helpers/valkey.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '3000' },
    batches: { type: 'string', default: '2' },
    seed: { type: 'string' },
    only: { type: 'string' },
  },
});

function whole(v: string | undefined, what: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${what} must be a whole number >= 0, got "${v}"`);
  return n;
}

async function main(): Promise<number> {
  const calls = whole(values.calls, 'calls');
  const batches = whole(values.batches, 'batches');
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : whole(values.seed, 'seed');
  const server = await new TestServer().start();
  const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 0 });
  try {
    let functions = await loadLibraryFunctions(client);
    if (values.only) {
      const wanted = new Set(values.only.split(',').map((n) => (n.startsWith('glidemq_') ? n : `glidemq_${n}`)));
      functions = functions.filter((f) => wanted.has(f.name));
      if (functions.length === 0) throw new Error(`--only names no function of the library: ${values.only}`);
    }
    const untemplated = functions.filter((f) => !hasTemplate(f.name)).map((f) => f.name);
    console.log(`${functions.length} functions${untemplated.length ? `; no valid argument list for: ${untemplated.join(', ')}` : ''}`);
    const log = new FailureLog();
    for (let i = 0; i < batches; i++) {
      const r = await runFuzzBatch(client, server.url, functions, (seed + i) >>> 0, calls, log);
      console.log(
        `seed ${r.seed} (${r.variant.paused ? 'paused' : 'running'}, globalConcurrency ${r.variant.globalConcurrency}): ` +
          `${r.calls} calls, ${r.errors} refused, ${r.failures} failures, ${r.ms} ms`,
      );
      for (const w of r.warnings) console.log(`  warning: ${w}`);
    }
    console.log(`\n${log.total} failing calls in ${log.groups.size} (function, kind) groups`);
    if (log.total > 0) console.log(`\n${log.table()}`);
    console.log(`\n${log.byFunction()}`);
    console.log(`\nreplay: node dist/test/tools/fuzz-report.js --seed ${seed} --batches ${batches} --calls ${calls}${values.only ? ` --only ${values.only}` : ''}`);
    return log.total > 0 ? 1 : 0;
  } finally {
    client.disconnect();
    await server.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.stack : String(err));
    process.exit(2);
  },
);
