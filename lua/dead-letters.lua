--[[ dead-letters.lua — dead letters (no registered functions here): FAILURE_TYPES.dead (a field of
  lua/outcomes.lua's table, not a local of its own: the main chunk's locals are few; DEAD below),
  the copy of a job that fails for good into its queue's dead-letter queue. Called by
  lua/outcomes.lua storeFailure, so every path that fails a job for good sends it: a finish
  (lua/finish.lua), stalled recovery past maxStalledCount (lua/reclaim.lua), a parent failed by
  its child (lua/flow-keys.lua), and any later path that stores a failure through storeFailure.
  Each of those calls FAILURE_TYPES.dead.target in its check phase, so the keys a send writes are
  checked before the first write (a path that does not reads the setting at its first send).
  The setting: the source queue's meta field `deadLetterQueue` names the dead-letter queue (a queue
  of the same prefix), written by glidemq_setDeadLetterQueue (lua/dead-letter.lua) when a Queue or
  a Worker is made with the option: the server decides, whichever client fails the job. Read only
  when a job fails for good (one HGET per call); a finish that does not fail a job for good never
  reads it.
  A dead letter is a job of the dead-letter queue, in its failed set: the source job's fields (name,
  data, opts, ts, attempts, stacktrace, progress, ...) without its claim, retry-mark, group and flow
  fields, with state 'failed', failedReason, attemptsMade and finishedOn of this failure, and
  originalQueue / originalJobId naming where it failed. Its id is '<sourceQueue>.<sourceId>.<n>'
  (n: the source meta's `deadLetters` counter, one per dead letter sent), or 'dl-' and the SHA1 of
  that when it is longer than a job id may be. The source job is stored as any failure is (its
  failed set, under its removeOnFail): the dead letter is a copy.
  Where the dead letter is written:
    standalone / Sentinel: in the dead-letter queue, in the same call that fails the job;
    cluster (the dead-letter queue is in another hash slot): whole, in the source queue's
      dead-outbox (hash: dead-letter id -> JSON {t: the server's ms, q: the dead-letter queue's
      name, f: the dead letter's fields}), in the same call. The worker relays it right after the
      reply (the reply's '{relay}' mark: glidemq_storeDeadLetters on the dead-letter queue, then
      glidemq_deadOutboxDone), a stalled check right after it failed jobs, and upkeep and heal
      relay what a crash left once it is older than a
      grace period (src/engine/producing/dead-letter-outbox.ts). Storing is idempotent: a dead
      letter whose id exists is not written again, so a record relayed twice is stored once.
]]
do
local DEAD = FAILURE_TYPES.dead
DEAD.FIELD = 'deadLetterQueue'
-- The source job's fields that are not the dead letter's: its claim, its retry marks, its group
-- place and its flow links (the dead letter is no claim, no group member and no flow node), and
-- the outcome fields the dead letter gets from this failure.
local NOT_COPIED = { owner = true, lockedAt = true, src = true, sid = true, ns = true, nsr = true, terms = true,
  fence = true, rf = true, grp = true, gseq = true, startsBase = true, parents = true, flow = true, failedBy = true,
  state = true, failedReason = true, attemptsMade = true, finishedOn = true }
local LETTER_TYPES = { 'meta', 'hash', 'failed', 'zset' }
local SOURCE_TYPES = { 'meta', 'hash' }
local OUTBOX_TYPES = { 'deadOutbox', 'hash' }

-- Whether one call may write every queue's keys (standalone, a Sentinel's primary), as
-- lua/flow-keys.lua decides it: CLUSTER KEYSLOT answers only on a cluster. Kept: it cannot change.
local reachesEveryQueue = nil
local function everyQueue()
  if reachesEveryQueue == nil then reachesEveryQueue = not pcall(redis.call, 'CLUSTER', 'KEYSLOT', 'glidemq') end
  return reachesEveryQueue
end

-- The queue name of queue keys `k` (the hash tag of its base).
local function queueName(k)
  return string.match(k.base, '{([^{}]*)}$')
end

-- The keys of queue `name` beside queue `k` (the same prefix).
DEAD.keysOf = function(k, name)
  return keysFor(string.match(k.base, '^(.*):{[^{}]*}$') .. ':{' .. name .. '}:meta')
end

--[[ Where queue `k` sends its dead letters, read once per call and kept on `k`: false when it has
  no dead-letter queue, else { name, source, dk } (dk: the dead-letter queue's keys when this call
  writes there, standalone; nil on a cluster, where the outbox carries it). Checks the types of the
  keys a send writes, so a check phase calls it before the first write (a failure's check does). ]]
DEAD.target = function(k)
  local t = rawget(k, '__dead')
  if t ~= nil then return t end
  t = false
  local name = redis.call('HGET', k.meta, DEAD.FIELD)
  if name and name ~= '' and name ~= queueName(k) then
    t = { name = name, source = queueName(k) }
    requireTypes(k, SOURCE_TYPES)
    if everyQueue() then
      t.dk = DEAD.keysOf(k, name)
      requireTypes(t.dk, LETTER_TYPES)
    else
      requireTypes(k, OUTBOX_TYPES)
    end
  end
  rawset(k, '__dead', t)
  return t
end

-- Stores dead letter `id` (fields `fields`, a flat list, finished at `finishedOn`) in the
-- dead-letter queue of keys `dk`, unless a key of that id exists (stored before: a relay repeated).
-- Returns true when it stored it. `dk`'s types were checked by the caller.
DEAD.store = function(dk, id, fields, finishedOn)
  local jk = jobKey(dk, id)
  if redis.call('EXISTS', jk) == 1 then return false end
  redis.call('HSET', jk, unpack(fields))
  redis.call('ZADD', dk.failed, finishedOn, id)
  -- the queue is found by discovery (its meta) and counts what it received
  redis.call('HINCRBY', dk.meta, 'deadLettersIn', 1)
  return true
end
DEAD.LETTER_TYPES = LETTER_TYPES

--[[ Sends job `id` (hash `jk`, still whole: called before its failure is stored, which may delete
  it) of queue `k`, failing for good at `now` with `reason` after `made` attempts, to the queue's
  dead-letter queue, if it has one (DEAD.target). On a cluster it marks `k` (rawset '__deadRelay'):
  the caller's reply asks the worker to relay. ]]
DEAD.send = function(k, jk, id, now, made, reason)
  local t = DEAD.target(k)
  if not t then return end
  local n = redis.call('HINCRBY', k.meta, 'deadLetters', 1)
  local lid = t.source .. '.' .. id .. '.' .. n
  if #lid > MAX_ID_LEN then lid = 'dl-' .. redis.sha1hex(lid) end
  local all = redis.call('HGETALL', jk)
  local f = {}
  for i = 1, #all, 2 do
    if not NOT_COPIED[all[i]] then
      f[#f + 1], f[#f + 2] = all[i], all[i + 1]
    end
  end
  local at = string.format('%d', now)
  for _, v in ipairs({ 'state', 'failed', 'failedReason', reason, 'attemptsMade', string.format('%d', made),
    'finishedOn', at, 'originalQueue', t.source, 'originalJobId', id }) do
    f[#f + 1] = v
  end
  if t.dk then
    DEAD.store(t.dk, lid, f, now)
  else
    redis.call('HSET', k.deadOutbox, lid, cjson.encode({ t = now, q = t.name, f = f }))
    rawset(k, '__deadRelay', true)
  end
end

-- Whether this call wrote a dead-outbox record (the reply's '{relay}' mark asks for its relay).
DEAD.wroteRecord = function(k)
  return rawget(k, '__deadRelay') == true
end
end
