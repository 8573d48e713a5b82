/**
 * A power-loss harness: a valkey-server whose AOF writes are held in its memory until it syncs
 * them (test/helpers/power-loss/holdfsync.c, an LD_PRELOAD shim built here once with the
 * machine's `cc`), so `powerCut()` (SIGKILL) loses exactly what a power cut would: everything the
 * server acknowledged after its last fsync/fdatasync of the AOF, and nothing it had synced.
 *
 *   const server = await new PowerLossServer({ persistence: 'aof-everysec' }).start();
 *   ... writes ...
 *   await server.powerCut();          // the machine loses power
 *   await server.start();             // boots again on the same directory (new process)
 *   server.durableAof()               // what is on disk (the AOF incr files, as text)
 *   await server.waitDurable('key')   // waits until the text is synced (e.g. a queue's first add)
 *   await server.stop();              // kills it and removes its directory
 *
 * Only Linux (glibc's RTLD_NEXT) with a C compiler: `powerLossSupported()` says whether both are
 * there (the tests that need the harness require it rather than skip).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from './fixtures.js';
import { TestServer, waitFor, type ServerOptions } from './valkey.js';

export const HOLDFSYNC_SOURCE = join(REPO_ROOT, 'test/helpers/power-loss/holdfsync.c');

let built: string | undefined;

/** True when this machine can build and preload the shim (Linux and a `cc`). */
export function powerLossSupported(): boolean {
  return process.platform === 'linux' && spawnSync('sh', ['-c', 'command -v cc']).status === 0;
}

/**
 * The shim's shared object, compiled once per source version into the temp directory (a file
 * named by the source's hash, so a changed source is rebuilt and concurrent runs share a build).
 */
export function holdFsyncLibrary(): string {
  if (built) return built;
  const source = readFileSync(HOLDFSYNC_SOURCE);
  const hash = createHash('sha256').update(source).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), 'glidemq-power-loss');
  const out = join(dir, `holdfsync-${hash}.so`);
  if (!existsSync(out)) {
    mkdirSync(dir, { recursive: true });
    const partial = `${out}.${process.pid}.tmp`;
    const cc = spawnSync('cc', ['-shared', '-fPIC', '-O2', '-Wall', '-o', partial, HOLDFSYNC_SOURCE, '-ldl', '-lpthread'], {
      encoding: 'utf8',
    });
    if (cc.status !== 0) throw new Error(`building the power-loss shim failed (cc exit ${cc.status}): ${cc.stderr}`);
    renameSync(partial, out); // whole or not at all, for a run that builds at the same time
  }
  built = out;
  return out;
}

/** A TestServer whose AOF writes reach the disk only when the server syncs them. */
export class PowerLossServer extends TestServer {
  constructor(opts: ServerOptions & { persistence: 'aof-everysec' | 'aof-always' }) {
    super({ ...opts, env: { ...opts.env, LD_PRELOAD: holdFsyncLibrary() } });
  }

  /** The power cut: SIGKILL, so whatever the server had not synced is gone. Restart with start(). */
  async powerCut(): Promise<void> {
    await this.kill();
  }

  /** What the AOF incr files hold on disk now, in order, as text (the commands as RESP). */
  durableAof(): string {
    const aofDir = join(this.dir, 'appendonlydir');
    if (!existsSync(aofDir)) return '';
    const incr = readdirSync(aofDir)
      .filter((f) => f.endsWith('.incr.aof'))
      .sort((a, b) => Number(/\.(\d+)\.incr\.aof$/.exec(a)?.[1]) - Number(/\.(\d+)\.incr\.aof$/.exec(b)?.[1]));
    return incr.map((f) => readFileSync(join(aofDir, f), 'latin1')).join('');
  }

  /** Resolves once `text` is in the synced AOF (after the server's next fsync under everysec). */
  async waitDurable(text: string, timeoutMs = 10000): Promise<void> {
    await waitFor(() => this.durableAof().includes(text), `"${text}" to be synced to the AOF`, timeoutMs);
  }
}
