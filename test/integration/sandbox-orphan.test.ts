/**
 * A sandbox child whose worker process dies (SIGKILL: no close, no exit handler) ends on its own,
 * even while its processor loops on the CPU and its event loop never turns (sandbox-child.ts).
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from '../../src/engine/queue/queue.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';
import { processorPath } from '../helpers/worker-spawn.js';

const SANDBOXED_WORKER = fileURLToPath(new URL('../fixtures/sandboxed-worker.js', import.meta.url));

/** Whether process `pid` runs (a zombie, ended but not yet reaped by whoever adopted it, does not). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // /proc/<pid>/stat: "pid (name) state ...": Z is a zombie
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

function readPid(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8')) || undefined;
  } catch {
    return undefined;
  }
}

describe('Sandbox child of a killed worker process (real valkey-server)', function () {
  this.timeout(20_000);
  const server = useServer();
  const started: ChildProcess[] = [];
  const orphans: number[] = [];

  afterEach(async () => {
    for (const p of started.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    // a child this test failed to see end would loop on a core for good
    for (const pid of orphans.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });

  // by default (on Linux with setpriv) the kernel kills the child; with fork options of its own,
  // the child's watchdog thread does (sandbox-channel.ts, sandbox-child.ts)
  for (const how of ['default', 'plain'] as const) {
    it(`a child stuck in a CPU loop ends soon after its worker process is SIGKILLed (${how} fork)`, () => orphanEnds(how));
  }

  async function orphanEnds(how: 'default' | 'plain'): Promise<void> {
    const name = uniqueQueue('orphan');
    const queue = new Queue(name, { connection: server().url });
    try {
      const pidFile = join(mkdtempSync(join(tmpdir(), 'glidemq-orphan-')), 'child.pid');
      const worker = spawn(process.execPath, [SANDBOXED_WORKER, server().url, name, processorPath('loop-forever.mjs'), how], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      started.push(worker);
      await queue.add('loop', { pidFile });
      const childPid = (await waitFor(() => readPid(pidFile), 'the sandbox child to run the job')) as number;
      orphans.push(childPid);
      expect(childPid).to.not.equal(worker.pid);
      expect(alive(childPid)).to.equal(true);
      const exited = new Promise((resolve) => worker.once('exit', resolve));
      worker.kill('SIGKILL');
      await exited;
      await waitFor(() => !alive(childPid), 'the orphaned child to end', 3_000);
    } finally {
      await queue.close();
    }
  }
});
