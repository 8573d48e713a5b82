/**
 * Bookkeeping for fault tests: which jobs a producer was told were added, how often the processor
 * ran each one, and the final check that nothing was lost and duplicates stay within at-least-once.
 */
import { expect } from 'chai';
import type { Queue } from '../../src/engine/queue/queue.js';
import { waitFor } from './valkey.js';

export class Ledger {
  /** Ids the producer got back from add(). */
  readonly added = new Set<string>();
  /** Processor runs per job id. */
  readonly runs = new Map<string, number>();
  /** Errors producers saw (and retried past). */
  readonly addErrors: string[] = [];

  ran(id: string): void {
    this.runs.set(id, (this.runs.get(id) ?? 0) + 1);
  }

  get duplicates(): number {
    let d = 0;
    for (const n of this.runs.values()) d += n - 1;
    return d;
  }

  /**
   * Adds jobs until `stop()` says so; an add that fails is retried, as a producer would. Returns
   * the number of adds that had to be retried.
   */
  async produce(queue: Queue, stop: () => boolean, pace = 10): Promise<number> {
    let i = 0;
    let retried = 0;
    while (!stop()) {
      const data = { i: i++ };
      for (;;) {
        try {
          this.added.add((await queue.add('fault', data)).id);
          break;
        } catch (err) {
          this.addErrors.push(String(err));
          retried++;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      if (i % pace === 0) await new Promise((r) => setTimeout(r, 2));
    }
    return retried;
  }

  /** Waits until every job the queue holds is finished, then checks no added job was lost. */
  async settle(queue: Queue, timeoutMs = 30000): Promise<void> {
    try {
      await this.waitSettled(queue, timeoutMs);
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${await this.describeMissing(queue)}`);
    }
    const ids = [...this.added];
    const states = await Promise.all(ids.map(async (id) => (await queue.getJob(id))?.state));
    ids.forEach((id, i) => expect(states[i], `job ${id}`).to.equal('completed'));
  }

  /** What the queue holds for the jobs that never ran, for a failure message. */
  async describeMissing(queue: Queue): Promise<string> {
    const counts = await queue.getJobCounts().catch((e) => String(e));
    const missing = [...this.added].filter((id) => !this.runs.has(id)).slice(0, 5);
    const raw = await Promise.all(missing.map((id) => queue.client.hgetall(queue.keys.job(id)).catch(() => ({}))));
    return `counts ${JSON.stringify(counts)}; never ran: ${missing.map((id, i) => `${id} ${JSON.stringify(raw[i])}`).join(', ')}`;
  }

  private async waitSettled(queue: Queue, timeoutMs: number): Promise<void> {
    await waitFor(
      async () => {
        const c = await queue.getJobCounts();
        return c.waiting + c.active + c.delayed + c.prioritized === 0 && [...this.added].every((id) => this.runs.has(id));
      },
      `all ${this.added.size} added jobs to be processed`,
      timeoutMs,
      50,
    );
  }

  /** Each fault may re-run the jobs that were in flight when it hit: at most `perFault` of them. */
  expectDuplicatesWithin(faults: number, perFault: number): void {
    expect(this.duplicates, `re-runs (${faults} faults)`).to.be.at.most(faults * perFault);
  }
}
