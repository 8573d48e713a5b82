/**
 * What the instruction counts (instructions.ts, add-instructions.ts, flow-instructions.ts) share:
 * a valkey-server under callgrind, whose counts a busy machine does not blur as it blurs timings,
 * the inclusive count of fcallCommand in a dump (every function call the server ran in that
 * stretch), and the worker's finish-and-claim loop made with direct FCALLs.
 *
 * Needs valgrind (callgrind_control, callgrind_annotate); the server runs ~50x slower under it.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, SERVER_BIN } from '../helpers/valkey.js';
import { sleep } from './measure.js';

/** The claims' terms the loop sends: the default lockDuration and maxStalledCount (lua/activate.lua claimTerms). */
const TERMS = [30_000, 1];

export interface CallgrindServer {
  url: string;
  /** A client of the server, outside any Queue. */
  admin: Redis;
  /** Starts the count afresh (what ran before is not counted). */
  zero(): void;
  /** Ends a counted stretch; the n-th dump is read by fcallInstructions(n). */
  dump(): void;
  /** The instructions inside FCALL in the n-th dump (from 1), and callgrind_annotate's text of it. */
  fcallInstructions(n: number): { count: number; annotated: string };
  /** Shuts the server down and removes its files (kept when KEEP_CALLGRIND is set). */
  stop(): Promise<void>;
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

export async function startCallgrindServer(label: string): Promise<CallgrindServer> {
  const dir = mkdtempSync(join(tmpdir(), `glidemq-${label}-`));
  const port = await freePort();
  writeFileSync(join(dir, 'valkey.conf'), `port ${port}\nbind 127.0.0.1\nsave ""\nappendonly no\ndir ${dir}\n`);
  const out = join(dir, 'callgrind.out');
  const server = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${out}`, SERVER_BIN, join(dir, 'valkey.conf')], { stdio: 'ignore' });
  const admin = new Redis({ port, lazyConnect: true });
  admin.on('error', () => undefined); // its reconnects after the SHUTDOWN of stop()
  const control = (what: string) => execFileSync('callgrind_control', [what, String(server.pid)], { stdio: 'ignore' });
  const stop = async () => {
    await admin.shutdown('NOSAVE').catch(() => undefined);
    admin.disconnect();
    await new Promise((r) => (server.exitCode === null ? server.once('exit', r) : r(undefined)));
    if (process.env.KEEP_CALLGRIND) console.log(`callgrind files kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitForPing(port);
    await admin.connect();
  } catch (err) {
    server.kill('SIGKILL');
    await stop();
    throw err;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    admin,
    zero: () => control('--zero'),
    dump: () => control('--dump'),
    fcallInstructions(n) {
      const annotated = execFileSync('callgrind_annotate', ['--inclusive=yes', `${out}.${n}`], { encoding: 'utf8', maxBuffer: 1 << 26 });
      const fcall = /([\d,]+) \([^)]*\)\s+\S*fcallCommand/.exec(annotated);
      if (!fcall) throw new Error(`callgrind_annotate shows no fcallCommand in dump ${n}`);
      return { count: Number(fcall[1].replace(/,/g, '')), annotated };
    },
    stop,
  };
}

/** A claim reply's job id and fence (lua/activate.lua: by position). */
function claimsOf(replies: unknown[]): [string, string][] {
  return replies.filter((r): r is unknown[] => Array.isArray(r)).map((c) => [String(c[0]), String(c[1])]);
}

/** Claims up to `count` jobs of queue `meta` for consumer c1, as a worker's first fetch does. */
export async function fetchClaims(admin: Redis, meta: string, count: number): Promise<[string, string][]> {
  return claimsOf(((await admin.call('FCALL', 'glidemq_fetch', 1, meta, 'c1', count, ...TERMS)) as unknown[]).slice(1));
}

/**
 * Completes `claims` and then every job of queue `meta` the way a worker does: each
 * glidemq_finishMany completes a batch (removed at once) and claims the next `batch`. Returns the
 * jobs finished.
 */
export async function finishAll(admin: Redis, meta: string, claims: [string, string][], batch: number): Promise<number> {
  let finished = 0;
  while (claims.length > 0) {
    const args: (string | number)[] = ['c1', claims.length, batch, '0', '', ...TERMS];
    for (const [id, fence] of claims) args.push(id, fence, 'completed', 'null', -1, '0', 0);
    const reply = (await admin.call('FCALL', 'glidemq_finishMany', 1, meta, ...args)) as unknown[];
    const statuses = reply.slice(0, claims.length);
    if (statuses.some((s) => s !== 'completed')) throw new Error(`glidemq_finishMany answered ${statuses.map(String).join(', ')}`);
    finished += claims.length;
    claims = claimsOf(reply.slice(claims.length));
  }
  return finished;
}

/** Runs queue `meta`'s backlog to the end in batches of `batch` (fetch, then finishAll). */
export async function runAll(admin: Redis, meta: string, batch: number): Promise<number> {
  return finishAll(admin, meta, await fetchClaims(admin, meta, batch), batch);
}

/** Runs a count's main: exits 0 when done, 2 naming `name` and the error otherwise. */
export function runCount(name: string, main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(`${name}: ${(err as Error).stack ?? String(err)}`);
      process.exit(2);
    },
  );
}
