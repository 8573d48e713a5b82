/**
 * A queue's dead-letter queue setting (lua/dead-letters.lua, lua/dead-letter.lua): the option
 * `deadLetterQueue: { name }` of a Queue or a Worker, checked here and stored in the source queue's
 * meta (glidemq_setDeadLetterQueue) when the Queue or Worker starts. The server reads it whenever a
 * job fails for good, whichever client fails it; the last writer's name is the one every later
 * failure uses.
 */
import type { Client } from '../connecting/connection.js';
import { callFunction } from '../connecting/library.js';
import { invalid } from '../shared/errors.js';
import { validateQueueName, type QueueKeys } from '../shared/keys.js';

/** The option as glide-mq spells it. */
export interface DeadLetterQueueOptions {
  /** The dead-letter queue's name (a queue of the same prefix, not the queue itself). */
  name: string;
}

/** The meta field that names a queue's dead-letter queue (lua/dead-letters.lua DEAD.FIELD). */
export const DEAD_LETTER_FIELD = 'deadLetterQueue';

/** The option checked (a mistake shows at construction): the dead-letter queue's name, or undefined for none given. */
export function checkDeadLetterQueue(o: DeadLetterQueueOptions | undefined, queue: string): string | undefined {
  if (o === undefined) return undefined;
  if (typeof o !== 'object' || o === null || typeof o.name !== 'string') {
    throw invalid(`deadLetterQueue must be an object { name }, the dead-letter queue's name, got ${String(o)}`);
  }
  validateQueueName(o.name, 'deadLetterQueue.name');
  if (o.name === queue) throw invalid(`deadLetterQueue.name must name another queue than ${queue} itself`);
  return o.name;
}

/** Stores queue `keys`' dead-letter queue `name` in its meta (none given: nothing is written; '' clears it). */
export async function storeDeadLetterQueue(client: Client, keys: QueueKeys, name: string | undefined): Promise<void> {
  if (name === undefined) return;
  await callFunction(client, 'glidemq_setDeadLetterQueue', keys.meta, [name]);
}

/** The dead-letter queue stored for queue `keys`, or undefined. */
export async function readDeadLetterQueue(client: Client, keys: QueueKeys): Promise<string | undefined> {
  const name = await client.hget(keys.meta, DEAD_LETTER_FIELD);
  return name ? name : undefined;
}
