/**
 * A load producer in its own process: `node dist/test/load/producer-process.js` with
 * {url, queue, settings} as JSON in GLIDEMQ_LOAD_PRODUCER. Reports on stdout, one JSON line each:
 *   {"event":"ready"}                             connected, library ensured
 *   {"event":"added","ids":[...],"fail":[...],"absorbed":0}   after each bulk
 *   {"event":"done","added":N}                    after SIGTERM, once the last bulk is written
 */
import { Queue } from '../../src/engine/queue/queue.js';
import { produce, type ProducerSettings } from './producer.js';

export interface ProducerProcessConfig {
  url: string;
  queue: string;
  settings: ProducerSettings;
}

function report(msg: object): void {
  process.stdout.write(JSON.stringify(msg) + '\n');
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.GLIDEMQ_LOAD_PRODUCER ?? '{}') as ProducerProcessConfig;
  const queue = new Queue(cfg.queue, { connection: cfg.url });
  let stopping = false;
  process.on('SIGTERM', () => {
    stopping = true;
  });
  await queue.waitUntilReady();
  report({ event: 'ready' });
  const added = await produce(queue, cfg.settings, () => stopping, (b) => report({ event: 'added', ...b }));
  await queue.close();
  report({ event: 'done', added });
}

main().catch((err) => {
  process.stderr.write(`producer-process: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(2);
});
