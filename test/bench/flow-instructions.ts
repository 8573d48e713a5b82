/**
 * A flow's server cost counted in instructions, which a busy machine does not blur as it blurs
 * timings (the flow.cpu row's measure, counted): a valkey-server under callgrind, `flows` flows of
 * a parent (queue 'p') and 10 children (queue 'c') added by a FlowProducer, then run to the end
 * with direct FCALLs the way a worker runs them: the children claimed and finished in batches of
 * `batch` (glidemq_finishMany, each finishing a batch and claiming the next), their last finish
 * releasing each parent, then the parents likewise. Every job is removeOnComplete, as the bench's.
 * Prints the instructions per flow inside FCALL (callgrind's inclusive count of fcallCommand) for
 * each phase (add, children, parents) and in all. With `annotate`, also prints the head of
 * callgrind_annotate --inclusive=yes for each phase (which commands and how much Lua each costs).
 *
 *   node dist/test/bench/flow-instructions.js [flows=200] [batch=10] [annotate]
 *
 * Needs valgrind (callgrind_control, callgrind_annotate); the server runs ~50x slower under it.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { FlowProducer, Queue } from '../../src/index.js';
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

const GONE = { removeOnComplete: true };
const terms = [30_000, 1]; // the default lockDuration and maxStalledCount (lua/activate.lua claimTerms)

/** Runs queue `meta`'s backlog to the end in finishMany batches of `batch`; returns the jobs finished. */
async function runAll(admin: Redis, meta: string, batch: number): Promise<number> {
  const call = (fn: string, args: (string | number)[]) => admin.call('FCALL', fn, 1, meta, ...args) as Promise<unknown[]>;
  let claims = claimsOf((await call('glidemq_fetch', ['c1', batch, ...terms])).slice(1));
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
  return finished;
}

async function main(): Promise<void> {
  const flows = Number(process.argv[2] ?? 200);
  const batch = Number(process.argv[3] ?? 10);
  const annotate = process.argv[4] === 'annotate';
  const dir = mkdtempSync(join(tmpdir(), 'glidemq-flow-instr-'));
  const port = await freePort();
  writeFileSync(join(dir, 'valkey.conf'), `port ${port}\nbind 127.0.0.1\nsave ""\nappendonly no\ndir ${dir}\n`);
  const out = join(dir, 'callgrind.out');
  const server = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${out}`, SERVER_BIN, join(dir, 'valkey.conf')], { stdio: 'ignore' });
  const admin = new Redis({ port, lazyConnect: true });
  admin.on('error', () => undefined); // its reconnects after the SHUTDOWN below
  const url = `redis://127.0.0.1:${port}`;
  let producer: FlowProducer | undefined;
  const queues: Queue[] = [];
  const dump = () => execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
  try {
    await waitForPing(port);
    await admin.connect();
    producer = new FlowProducer({ connection: url });
    for (const name of ['p', 'c']) {
      const q = new Queue(name, { connection: url });
      await q.waitUntilReady();
      queues.push(q);
    }
    const [parents, children] = queues;
    const flowOf = (tag: number) => ({
      name: 'parent', queueName: 'p', data: { tag }, opts: GONE,
      children: Array.from({ length: 10 }, (_, i) => ({ name: 'child', queueName: 'c', data: { i }, opts: GONE })),
    });
    await producer.add(flowOf(-1)); // load and connect outside the count
    await runAll(admin, children.keys.meta, batch);
    await runAll(admin, parents.keys.meta, batch);
    execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
    for (let added = 0; added < flows; added += 8) {
      await Promise.all(Array.from({ length: Math.min(8, flows - added) }, (_, i) => producer!.add(flowOf(added + i))));
    }
    dump();
    const kids = await runAll(admin, children.keys.meta, batch);
    dump();
    const tops = await runAll(admin, parents.keys.meta, batch);
    dump();
    if (kids !== flows * 10 || tops !== flows) throw new Error(`ran ${kids} children and ${tops} parents of ${flows} flows`);
    let total = 0;
    const parts: string[] = [];
    for (const [i, phase] of ['add', 'children', 'parents'].entries()) {
      const annotated = execFileSync('callgrind_annotate', ['--inclusive=yes', `${out}.${i + 1}`], { encoding: 'utf8', maxBuffer: 1 << 26 });
      const fcall = /([\d,]+) \([^)]*\)\s+\S*fcallCommand/.exec(annotated);
      if (!fcall) throw new Error(`callgrind_annotate shows no fcallCommand for ${phase}`);
      const perFlow = Number(fcall[1].replace(/,/g, '')) / flows;
      total += perFlow;
      parts.push(`${phase} ${(perFlow / 1000).toFixed(1)}k`);
      if (annotate) console.log(`--- ${phase}\n${annotated.split('\n').slice(0, 90).join('\n')}`);
    }
    console.log(`${flows} flows of 10 children, batches of ${batch}: ${(total / 1000).toFixed(1)}k server instructions per flow inside FCALL (${parts.join(', ')})`);
  } finally {
    await producer?.close();
    for (const q of queues) await q.close();
    await admin.shutdown('NOSAVE').catch(() => undefined);
    admin.disconnect();
    await new Promise((r) => (server.exitCode === null ? server.once('exit', r) : r(undefined)));
    if (process.env.KEEP_CALLGRIND) console.log(`callgrind files kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`flow-instructions: ${(err as Error).stack ?? String(err)}`);
    process.exit(2);
  },
);
