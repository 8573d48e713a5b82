/** Small conveniences for engine tests: unique queue names, collecting processed jobs, cleanup. */
import { randomBytes } from 'node:crypto';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker, type Processor, type WorkerOptions } from '../../src/engine/consuming/worker.js';
import { FlowProducer, type FlowProducerOptions } from '../../src/engine/flows/flow-producer.js';
import type { TestServer } from './valkey.js';

export function uniqueQueue(label = 'q'): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

export class Harness {
  readonly queues: Queue[] = [];
  readonly workers: Worker[] = [];
  readonly flowProducers: FlowProducer[] = [];
  constructor(private readonly server: () => TestServer) {}

  queue(name: string): Queue {
    const q = new Queue(name, { connection: this.server().url });
    this.queues.push(q);
    return q;
  }

  worker(name: string, processor: Processor, opts: WorkerOptions = {}): Worker {
    const w = new Worker(name, processor, { connection: this.server().url, blockTimeout: 1000, ...opts });
    w.on('error', () => undefined);
    this.workers.push(w);
    return w;
  }

  /** A FlowProducer on the server, or on `connection` (a proxy's), closed by cleanup. */
  flowProducer(connection: FlowProducerOptions['connection'] = this.server().url): FlowProducer {
    const f = new FlowProducer({ connection });
    this.flowProducers.push(f);
    return f;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.workers.splice(0).map((w) => w.close(true)));
    await Promise.all(this.flowProducers.splice(0).map((f) => f.close()));
    await Promise.all(this.queues.splice(0).map((q) => q.close()));
  }
}
