/**
 * A worker in its own process that fails one job for good and then never relays (the crash
 * window of issue 30's dead letters on a cluster): `node dist/test/helpers/dead-letter-finisher.js`
 * with {url, queue} as JSON in GLIDEMQ_TEST_FINISHER. It claims one job, fails it for good with
 * the finish call a worker makes (glidemq_finish, no retry), reports on stdout
 *   {"event":"failed","id":"7","reply":[...]}
 * once the server acknowledged the failure, and then waits to be SIGKILLed: the relay the reply
 * asked for never runs.
 */
import { Queue } from '../../src/engine/queue/queue.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { claimAs, termsArgs } from './recovery.js';

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.GLIDEMQ_TEST_FINISHER ?? '{}') as { url: string; queue: string };
  const q = new Queue(cfg.queue, { connection: { url: cfg.url, cluster: true } });
  const consumer = `finisher-${process.pid}`;
  const [claim] = await claimAs(q, consumer, 1, { lockDuration: 60000 });
  const reply = (await callFunction(q.client, 'glidemq_finish', q.keys.meta, [
    claim.id, claim.fence, consumer, 'failed:Error: boom\n    at the processor', 'boom', -1, 0, '', 1, '0', ...termsArgs({ lockDuration: 60000 }),
  ])) as unknown[];
  process.stdout.write(JSON.stringify({ event: 'failed', id: claim.id, reply }) + '\n');
  setInterval(() => undefined, 60000); // waits for its SIGKILL
}

main().catch((err) => {
  process.stderr.write(`dead-letter-finisher: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(2);
});
