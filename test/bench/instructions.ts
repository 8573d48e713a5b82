/**
 * The hot path's server cost counted in instructions, which a busy machine does not blur as it
 * blurs timings: a valkey-server under callgrind, a backlog of tiny jobs (removeOnComplete), and
 * glidemq_finishMany called directly, each call completing a batch of `batch` jobs and claiming
 * the next `batch` (what a worker's finish-and-claim does), until the backlog is done. Prints the
 * instructions per job inside FCALL (callgrind's inclusive count of fcallCommand). Two builds are
 * compared by running this in each; the count repeats within about 0.2 %.
 *
 *   node dist/test/bench/instructions.js [jobs=2000] [batch=40]
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

/** A claim reply's job id and fence (lua/activate.lua: by position). */
function claimsOf(replies: unknown[]): [string, string][] {
  return replies.filter((r): r is unknown[] => Array.isArray(r)).map((c) => [String(c[0]), String(c[1])]);
}

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
  const batch = Number(process.argv[3] ?? 40);
  const dir = mkdtempSync(join(tmpdir(), 'glidemq-instr-'));
  const port = await freePort();
  writeFileSync(join(dir, 'valkey.conf'), `port ${port}\nbind 127.0.0.1\nsave ""\nappendonly no\ndir ${dir}\n`);
  const out = join(dir, 'callgrind.out');
  const server = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${out}`, SERVER_BIN, join(dir, 'valkey.conf')], { stdio: 'ignore' });
  const admin = new Redis({ port, lazyConnect: true });
  admin.on('error', () => undefined); // its reconnects after the SHUTDOWN below
  let q: Queue | undefined;
  try {
    await waitForPing(port);
    await admin.connect();
    q = new Queue('q', { connection: `redis://127.0.0.1:${port}` });
    await q.waitUntilReady();
    for (let done = 0; done < jobs; done += 1000) {
      await q.addBulk(Array.from({ length: Math.min(1000, jobs - done) }, (_, i) => ({ name: 'n', data: { i: done + i }, opts: { removeOnComplete: true } })));
    }
    const terms = [30_000, 1]; // the default lockDuration and maxStalledCount (lua/activate.lua claimTerms)
    const call = (fn: string, args: (string | number)[]) => admin.call('FCALL', fn, 1, q!.keys.meta, ...args) as Promise<unknown[]>;
    let claims = claimsOf((await call('glidemq_fetch', ['c1', batch, ...terms])).slice(1));
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    let finished = 0;
    while (claims.length > 0) {
      const args: (string | number)[] = ['c1', claims.length, batch, '0', '', ...terms];
      for (const [id, fence] of claims) args.push(id, fence, 'completed', 'null', -1, '0', 0);
      const reply = await call('glidemq_finishMany', args);
      const statuses = reply.slice(0, claims.length);
      if (statuses.some((s) => s !== 'completed')) throw new Error(`glidemq_finishMany answered ${statuses.map(String).join(', ')}`);
      finished += claims.length;
      claims = claimsOf(reply.slice(claims.length));
    }
    execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
    const annotated = execFileSync('callgrind_annotate', ['--inclusive=yes', `${out}.1`], { encoding: 'utf8', maxBuffer: 1 << 26 });
    const fcall = /([\d,]+) \([^)]*\)\s+\S*fcallCommand/.exec(annotated);
    if (!fcall) throw new Error('callgrind_annotate shows no fcallCommand');
    const perJob = Number(fcall[1].replace(/,/g, '')) / finished;
    console.log(`${finished} jobs in batches of ${batch}: ${(perJob / 1000).toFixed(2)}k server instructions per job inside FCALL`);
  } finally {
    await q?.close();
    await admin.shutdown('NOSAVE').catch(() => undefined);
    admin.disconnect();
    await new Promise((r) => (server.exitCode === null ? server.once('exit', r) : r(undefined)));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`instructions: ${(err as Error).stack ?? String(err)}`);
    process.exit(2);
  },
);
