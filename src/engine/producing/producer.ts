/**
 * Call numbers for once-only adds (lua/producers.lua). A Queue is one producer: a random id, and
 * a number per add call (glidemq_add or glidemq_addData: one numbering for both). ioredis re-sends
 * a call whose reply it never got; the function finds the number already run and answers with the first run's reply, so the jobs are stored once
 * and the caller gets their ids. Each call also tells the server the lowest number still waiting
 * for its reply: replies below it can never be asked for again, and the server drops them.
 */
import { randomBytes } from 'node:crypto';

export interface ProducerCall {
  /** The head arguments glidemq_add and glidemq_addData take after maxPayload: producer, seq, answeredBelow. */
  readonly args: [string, number, number];
  /** Call once the call settled (answered or failed for good): it will not be sent again. */
  done(): void;
}

export class Producer {
  /** 16 characters of base64url: unique among the producers of a queue for all practical purposes. */
  readonly id = randomBytes(12).toString('base64url');
  private last = 0;
  /** The lowest number that may still be unanswered; advanced lazily past settled calls. */
  private low = 1;
  private readonly open = new Set<number>();

  /** Whether every call made so far is settled (none can be re-sent any more). */
  get settled(): boolean {
    return this.open.size === 0;
  }

  /** Whether any call was made. */
  get used(): boolean {
    return this.last > 0;
  }

  next(): ProducerCall {
    const seq = ++this.last;
    this.open.add(seq);
    while (this.low < seq && !this.open.has(this.low)) this.low++;
    return { args: [this.id, seq, this.low], done: () => this.open.delete(seq) };
  }
}
