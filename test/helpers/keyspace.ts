/** A fingerprint of every key and its value (DUMP), to show that a refused call wrote nothing. */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

export async function keyspaceFingerprint(client: Redis, pattern = '*'): Promise<string> {
  const keys = (await client.keys(pattern)).sort();
  const dumps = await Promise.all(keys.map((k) => client.dumpBuffer(k)));
  return keys.map((k, i) => `${k} ${dumps[i] ? createHash('sha1').update(dumps[i]!).digest('hex') : 'gone'}`).join('\n');
}
