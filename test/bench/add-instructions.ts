/**
 * A plain add's server cost counted in instructions (as flow-instructions.ts counts a flow's): a
 * valkey-server under callgrind, `jobs` jobs added by Queue.addBulk in bulks of `bulk`, each job
 * with its own data and options of its own (so the bulk goes through glidemq_add, 12 arguments
 * per job) or, with `shared`, options shared by the bulk (glidemq_addData, its data alone).
 * Prints the instructions per job inside FCALL (callgrind's inclusive count of fcallCommand).
 *
 *   node dist/test/bench/add-instructions.js [jobs=2000] [bulk=50] [shared]
 *
 * Needs valgrind (callgrind_control, callgrind_annotate); the server runs ~50x slower under it.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Queue } from '../../src/index.js';
import { freePort, SERVER_BIN } from '../helpers/valkey.js';
import { sleep } from './measure.js';

async function waitForPing(port: number): Promise<void> {
  for (let i = 0; i < 240; i++) {
    const r = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => undefined);
    try {
      await r.connect();
      if ((await r.ping()) === 'PONG') return;
    } catch {
      // not listening yet: callgrind starts the server slowly
    } finally {
      r.disconnect();
    }
    await sleep(500);
  }
  throw new Error(`valkey-server under callgrind did not answer on port ${port}`);
}

async function main(): Promise<void> {
  const jobs = Number(process.argv[2] ?? 2000);
  const bulk = Number(process.argv[3] ?? 50);
  const shared = process.argv[4] === 'shared';
  const dir = mkdtempSync(join(tmpdir(), 'glidemq-add-instr-'));
  const port = await freePort();
  writeFileSync(join(dir, 'valkey.conf'), `port ${port}\nbind 127.0.0.1\nsave ""\nappendonly no\ndir ${dir}\n`);
  const out = join(dir, 'callgrind.out');
  const server = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${out}`, SERVER_BIN, join(dir, 'valkey.conf')], { stdio: 'ignore' });
  const admin = new Redis({ port, lazyConnect: true });
  admin.on('error', () => undefined); // its reconnects after the SHUTDOWN below
  let queue: Queue | undefined;
  try {
    await waitForPing(port);
    await admin.connect();
    queue = new Queue('a', { connection: `redis://127.0.0.1:${port}` });
    await queue.waitUntilReady();
    // shared: every job the same options; else each its own attempts (a bulk of mixed options)
    const bulkOf = (from: number) => Array.from({ length: bulk }, (_, i) => ({
      name: 'job', data: { n: from + i }, opts: shared ? { removeOnComplete: true } : { removeOnComplete: true, attempts: 1 + (i % 2) },
    }));
    await queue.addBulk(bulkOf(-bulk)); // load and connect outside the count
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    for (let added = 0; added < jobs; added += bulk) await queue.addBulk(bulkOf(added));
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
    const annotated = execFileSync('callgrind_annotate', ['--inclusive=yes', `${out}.1`], { encoding: 'utf8', maxBuffer: 1 << 26 });
    const fcall = /([\d,]+) \([^)]*\)\s+\S*fcallCommand/.exec(annotated);
    if (!fcall) throw new Error('callgrind_annotate shows no fcallCommand');
    const perJob = Number(fcall[1].replace(/,/g, '')) / jobs;
    console.log(`${jobs} jobs in bulks of ${bulk} (${shared ? 'shared options: glidemq_addData' : 'options per job: glidemq_add'}): ` +
      `${(perJob / 1000).toFixed(1)}k server instructions per job inside FCALL`);
  } finally {
    await queue?.close();
    await admin.shutdown('NOSAVE').catch(() => undefined);
    admin.disconnect();
    await new Promise((r) => (server.exitCode === null ? server.once('exit', r) : r(undefined)));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`add-instructions: ${(err as Error).stack ?? String(err)}`);
    process.exit(2);
  },
);
