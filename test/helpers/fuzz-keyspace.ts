/**
 * Keyspace images for the function fuzz: a snapshot (DUMP + absolute expiry of every key) to put a
 * state back, and a fingerprint (one digest per key) to tell whether a call changed anything.
 *
 * Why not compare DUMPs: a hash or set held as a hashtable dumps its members in hash-table order,
 * which differs between two keys of equal content (a restored key against the one it was dumped
 * from), and a list, zset or string dumps its encoding. So the fingerprint digests the content,
 * sorted where the type has no order: type, expiry and members. A stream's content is everything
 * XINFO STREAM FULL shows (entries, ids, consumer groups, pending entries with their delivery times
 * and counts, consumers) except the consumers' seen-time and active-time: a read that claims
 * nothing (XAUTOCLAIM, XREADGROUP of an existing consumer) moves them without being a write, and
 * Valkey does not count it as one, so neither does this.
 * The fingerprint is computed by one read-only script, in one round trip (of every key, or of the
 * keys it is given).
 */
import type { ChainableCommander, Redis } from 'ioredis';

export interface KeyImage {
  dump: Buffer;
  /** Absolute expiry (ms), -1 for none: unlike PTTL it does not move while the test runs. */
  expireAt: number;
  type: string;
}
export type Snapshot = Map<string, KeyImage>;
/** key -> '<type> <expireAt> <sha1 of content>'. */
export type Fingerprint = Map<string, string>;

const FINGERPRINT_LUA = `
local function sorted(list) table.sort(list) return list end
local SKIP = { ['seen-time'] = true, ['active-time'] = true, ['radix-tree-keys'] = true, ['radix-tree-nodes'] = true }
-- An XINFO reply without the fields named in SKIP (at any depth of its field/value lists).
local function strip(v)
  if type(v) ~= 'table' then return v end
  local out, i = {}, 1
  while i <= #v do
    if type(v[i]) == 'string' and SKIP[v[i]] then
      i = i + 2
    else
      out[#out + 1] = strip(v[i])
      i = i + 1
    end
  end
  return out
end
local function content(k, t)
  if t == 'stream' then return cjson.encode(strip(redis.call('XINFO', 'STREAM', k, 'FULL', 'COUNT', 0))) end
  if t == 'string' then return redis.call('GET', k) end
  if t == 'list' then return cjson.encode(redis.call('LRANGE', k, 0, -1)) end
  if t == 'set' then return cjson.encode(sorted(redis.call('SMEMBERS', k))) end
  if t == 'zset' then return cjson.encode(redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')) end
  if t == 'hash' then
    local h, fields, flat = redis.call('HGETALL', k), {}, {}
    local values = {}
    for i = 1, #h, 2 do fields[#fields + 1] = h[i]; values[h[i]] = h[i + 1] end
    for _, f in ipairs(sorted(fields)) do flat[#flat + 1] = f; flat[#flat + 1] = values[f] end
    return cjson.encode(flat)
  end
  return redis.call('DUMP', k)
end
local out = {}
local function add(keys)
  for _, k in ipairs(keys) do
    local t = redis.call('TYPE', k)['ok']
    if t ~= 'none' then
      out[#out + 1] = k
      out[#out + 1] = t .. ' ' .. redis.call('PEXPIRETIME', k) .. ' ' .. redis.sha1hex(content(k, t))
    end
  end
end
if #KEYS > 0 then
  add(KEYS)
  return out
end
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'COUNT', 1000)
  cursor = r[1]
  add(r[2])
until cursor == '0'
return out
`;

/** The fingerprint of every key; or, with `keys`, of those keys (absent ones are left out). */
export async function fingerprint(client: Redis, keys: string[] = []): Promise<Fingerprint> {
  return toFingerprint((await client.call('EVAL_RO', FINGERPRINT_LUA, keys.length, ...keys)) as string[]);
}

/** The same call queued on a pipeline (its reply goes through toFingerprint). */
export function queueFingerprint(p: ChainableCommander, keys: string[]): void {
  p.call('EVAL_RO', FINGERPRINT_LUA, keys.length, ...keys);
}

export function toFingerprint(flat: string[]): Fingerprint {
  const fp: Fingerprint = new Map();
  for (let i = 0; i + 1 < flat.length; i += 2) fp.set(flat[i], flat[i + 1]);
  return fp;
}

/**
 * The server's count of writes since start (INFO `rdb_changes_since_last_save`; nothing is ever
 * saved here). Equal before and after a call: the call wrote nothing, no fingerprint needed.
 */
export function writeCount(info: string): number {
  const m = /rdb_changes_since_last_save:(\d+)/.exec(info);
  if (!m) throw new Error('INFO persistence shows no rdb_changes_since_last_save');
  return Number(m[1]);
}

/** What differs, one line per key: 'added', 'removed', 'changed' (with a type or expiry change named). */
export function diff(before: Fingerprint, after: Fingerprint): string[] {
  const out: string[] = [];
  for (const [k, a] of before) {
    const b = after.get(k);
    if (b === undefined) out.push(`${k} removed`);
    else if (a !== b) out.push(`${k} ${describeChange(a, b)}`);
  }
  for (const k of after.keys()) if (!before.has(k)) out.push(`${k} added`);
  return out.sort();
}

function describeChange(a: string, b: string): string {
  const [ta, ea, ca] = a.split(' ');
  const [tb, eb, cb] = b.split(' ');
  if (ta !== tb) return `changed type ${ta}->${tb}`;
  if (ca === cb && ea !== eb) return 'ttl changed';
  return 'changed';
}

export async function snapshot(client: Redis): Promise<Snapshot> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await client.scan(cursor, 'COUNT', 1000);
    keys.push(...found);
    cursor = next;
  } while (cursor !== '0');
  const p = client.pipeline();
  for (const k of keys) p.dumpBuffer(k).pexpiretime(k).type(k);
  const r = (await p.exec()) ?? [];
  const snap: Snapshot = new Map();
  keys.forEach((k, i) => {
    const dump = r[i * 3][1] as Buffer | null;
    if (dump) snap.set(k, { dump, expireAt: Number(r[i * 3 + 1][1]), type: String(r[i * 3 + 2][1]) });
  });
  return snap;
}

/**
 * Puts back the keys of `snap` named in `keys` (all of them, on an emptied database, when `keys` is
 * not given) and deletes those of `keys` that it does not hold.
 */
export async function restore(client: Redis, snap: Snapshot, keys?: Iterable<string>): Promise<void> {
  const p = client.pipeline();
  if (!keys) p.flushall();
  for (const k of keys ?? snap.keys()) {
    const v = snap.get(k);
    if (!v) p.del(k);
    else if (v.expireAt > 0) p.call('RESTORE', k, v.expireAt, v.dump, 'REPLACE', 'ABSTTL');
    else p.call('RESTORE', k, 0, v.dump, 'REPLACE');
  }
  const r = (await p.exec()) ?? [];
  const err = r.find(([e]) => e);
  if (err) throw new Error(`restoring the fuzz keyspace failed: ${String(err[0])}`);
}
