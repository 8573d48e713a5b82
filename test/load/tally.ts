/**
 * The load run's ledger: which jobs producers were told were added (and which of them are designed
 * to fail), and the final outcome each worker reported. Jobs are named `<queue>/<id>`.
 */
import type { AddedBatch } from './producer.js';

export class Tally {
  readonly produced = new Set<string>();
  readonly mustFail = new Set<string>();
  readonly completed = new Map<string, number>();
  readonly failed = new Map<string, number>();
  absorbed = 0;
  /** Final outcomes reported so far (the throughput counter). */
  finished = 0;

  added(queue: string, b: AddedBatch): void {
    for (const id of b.ids) this.produced.add(`${queue}/${id}`);
    for (const id of b.fail) this.mustFail.add(`${queue}/${id}`);
    this.absorbed += b.absorbed;
  }

  /** A job's final outcome (a retried attempt is not one). */
  outcome(queue: string, id: string, status: 'completed' | 'failed'): void {
    const m = status === 'completed' ? this.completed : this.failed;
    const key = `${queue}/${id}`;
    m.set(key, (m.get(key) ?? 0) + 1);
    this.finished++;
  }

  /** Every produced job has its final outcome. */
  get settled(): boolean {
    for (const key of this.produced) if (!this.completed.has(key) && !this.failed.has(key)) return false;
    return true;
  }

  /** What went wrong, as lines: lost jobs, wrong outcomes, repeats, unknown jobs. Empty when all is well. */
  problems(): string[] {
    const out: string[] = [];
    const lost = [...this.produced].filter((k) => !this.completed.has(k) && !this.failed.has(k));
    if (lost.length) out.push(`${lost.length} lost (no outcome): ${lost.slice(0, 5).join(', ')}`);
    const wrongFail = [...this.failed.keys()].filter((k) => !this.mustFail.has(k));
    if (wrongFail.length) out.push(`${wrongFail.length} failed that should complete: ${wrongFail.slice(0, 5).join(', ')}`);
    const wrongDone = [...this.completed.keys()].filter((k) => this.mustFail.has(k));
    if (wrongDone.length) out.push(`${wrongDone.length} completed that should fail: ${wrongDone.slice(0, 5).join(', ')}`);
    const repeats = [...this.completed, ...this.failed].filter(([, n]) => n > 1);
    if (repeats.length) out.push(`${repeats.length} finished more than once: ${repeats.slice(0, 5).map(([k]) => k).join(', ')}`);
    const unknown = [...this.completed.keys(), ...this.failed.keys()].filter((k) => !this.produced.has(k));
    if (unknown.length) out.push(`${unknown.length} finished but never reported added: ${unknown.slice(0, 5).join(', ')}`);
    if (this.absorbed) out.push(`${this.absorbed} adds absorbed by dedup (every dedup id is unique)`);
    return out;
  }

  countFor(queue: string, m: Map<string, number>): number {
    let n = 0;
    for (const k of m.keys()) if (k.startsWith(`${queue}/`)) n++;
    return n;
  }
}
