--[[ workers.lua — the worker registry (register, unregister, list) and the queue's latency
  (the age of its oldest waiting job).
  Why a registry: an operator asks which workers serve a queue (`glidemq workers`, `pel` naming
  the worker behind a claim). The consumer group lists consumers, but a consumer outlives its
  process (it is removed only when idle), and it says nothing about the host, pid or concurrency.
  So each worker writes its info here when it starts and again on a timer (once per refresh, never
  per job), and removes it on close. A worker that dies without closing stops refreshing and its
  entry expires by the server's clock: nothing has to notice it died.
  Keys (in the queue's slot):
    <base>:workers          hash, field = the worker's id (its consumer name), value = its info
                            as JSON (what the worker sent, plus id, startedAt, lastSeen, expiresAt).
    <base>:workers-expiry   zset, member = the worker's id, score = when its entry expires (ms,
                            the server's clock).
  Requests from afar (`glidemq workers --quiet|--stop <id>`, Queue.quietWorker/stopWorker): the
  entry's `request` field, 'quiet' (take no new jobs) or 'stop' (finish the running jobs and
  close), written by glidemq_requestWorker and kept by every refresh. The worker reads it in the
  reply to its next refresh and obeys; the entry keeps saying it, so `workers` shows it.
  Both keys expire (PEXPIREAT) with the last entry they hold: a registry nobody refreshes goes away
  on its own. Expired entries are dropped by every registration (a few) and by the listing.

  glidemq_registerWorker — registers or refreshes one worker.
  KEYS[1]  meta key.
  ARGV[1]  id: the worker's consumer name (the one its claims carry).
  ARGV[2]  info: a JSON object of at most 4096 bytes (host, pid, queue, concurrency, running,
           jobs, version, ...; its id, startedAt, lastSeen, expiresAt and request are set here).
  ARGV[3]  ttl: ms from the server's now until the entry expires unless refreshed (1..86400000).
  Returns  {now, request}: the server's now (ms), the worker's lastSeen; the request made of it
           ('quiet', 'stop', or '' for none).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a registry key holds another type).

  glidemq_unregisterWorker — removes one worker's entry (its close()).
  KEYS[1]  meta key.
  ARGV[1]  id: the worker's consumer name.
  Returns  1 when it was registered, else 0.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a registry key holds another type).

  glidemq_requestWorker — asks a live worker to go quiet or to stop (it reads it at its next refresh).
  KEYS[1]  meta key.
  ARGV[1]  id: the worker's consumer name.
  ARGV[2]  request: 'quiet' (take no new jobs) or 'stop' (finish the running jobs and close); a
           stop already asked for is not turned back into a quiet.
  Returns  1 when a live worker has that id (asked), else 0 (nothing written).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a registry key holds another type).

  glidemq_listWorkers — the live workers, expired entries dropped first.
  KEYS[1]  meta key.
  ARGV     none.
  Returns  {now, info1, info2, ...}: the server's now (ms), then each live worker's info (JSON
           text), the one expiring first first.
  Errors   ERR_INVALID (any argument), ERR_WRONG_TYPE (a registry key holds another type).

  glidemq_oldestWaiting (read-only) — the queue's latency.
  KEYS[1]  meta key.
  ARGV     none.
  Returns  ms from when the oldest waiting job became waiting until the server's now, or -1 when
           no job waits. Exact for the job stream (the first entry after the group's last
           delivered id: an entry id carries the ms it was added, or put back by a retry or a
           promotion) and for the LIFO list (its last job waited longest; its add time, plus
           its delay for a job added delayed). Sampled, by add time, where an exact answer costs
           a scan: prioritized jobs (the next to run, and the first of the lowest priority
           present: each priority runs in order, so those are the oldest of their band when
           only two bands wait) and groups (the head of the line of at most 20 ready and 20
           rate-held groups; a group parked at its concurrency limit is not looked at).
  Errors   ERR_INVALID (any argument), ERR_WRONG_TYPE (a key it reads holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local MAX_INFO = 4096 -- bytes of one worker's info
local PRUNE_ON_REGISTER = 10 -- expired entries a registration drops
local PRUNE_ON_LIST = 1000 -- expired entries a listing drops
local GROUP_SAMPLE = 20 -- groups of each kind glidemq_oldestWaiting looks at
local REGISTRY_TYPES = { 'workers', 'hash', 'workersExpiry', 'zset' }

local INFO = kind('a JSON object of at most ' .. MAX_INFO .. ' bytes', function(v)
  if #v > MAX_INFO then return nil end
  return ARG.jsonObject.check(v)
end)
local REGISTER_ARGS = { 'id', ARG.nonEmpty, 'info', INFO, 'ttl', ARG.int(1, 86400000) }
local UNREGISTER_ARGS = { 'id', ARG.nonEmpty }
local REQUEST_ARGS = { 'id', ARG.nonEmpty, 'request', ARG.oneOf('quiet', 'stop') }
local NO_ARGS = {}

-- Drops at most `limit` entries expired at `now`.
local function prune(k, now, limit)
  local dead = redis.call('ZRANGEBYSCORE', k.workersExpiry, '-inf', now, 'LIMIT', 0, limit)
  if #dead == 0 then return end
  redis.call('HDEL', k.workers, unpack(dead))
  redis.call('ZREM', k.workersExpiry, unpack(dead))
end

-- Both keys live as long as their last entry (they are gone when empty).
local function expireWithLast(k)
  local last = redis.call('ZRANGE', k.workersExpiry, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', k.workers, last[2])
    redis.call('PEXPIREAT', k.workersExpiry, last[2])
  end
end

register('glidemq_registerWorker', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_registerWorker', args, REGISTER_ARGS)
  requireTypes(k, REGISTRY_TYPES)
  local now = serverNow()
  local info = cjson.decode(a.info)
  local startedAt, request = now, nil
  local was = redis.call('HGET', k.workers, a.id)
  if was then
    local ok, old = pcall(cjson.decode, was)
    if ok and type(old) == 'table' and tonumber(old.startedAt) then startedAt = tonumber(old.startedAt) end
    if ok and type(old) == 'table' and (old.request == 'quiet' or old.request == 'stop') then request = old.request end
  end
  info.id = a.id
  info.startedAt = startedAt
  info.request = request
  info.lastSeen = now
  info.expiresAt = now + a.ttl
  -- write phase
  prune(k, now, PRUNE_ON_REGISTER)
  redis.call('HSET', k.workers, a.id, cjson.encode(info))
  redis.call('ZADD', k.workersExpiry, now + a.ttl, a.id)
  expireWithLast(k)
  return { now, request or '' }
end)

register('glidemq_requestWorker', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_requestWorker', args, REQUEST_ARGS)
  requireTypes(k, REGISTRY_TYPES)
  local expires = tonumber(redis.call('ZSCORE', k.workersExpiry, a.id))
  local was = redis.call('HGET', k.workers, a.id)
  if not expires or expires <= serverNow() or not was then return 0 end
  local ok, info = pcall(cjson.decode, was)
  if not ok or type(info) ~= 'table' then return 0 end -- not a worker's entry (another program wrote it)
  if info.request == 'stop' then return 1 end
  info.request = a.request
  -- write phase
  redis.call('HSET', k.workers, a.id, cjson.encode(info))
  return 1
end)

register('glidemq_unregisterWorker', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_unregisterWorker', args, UNREGISTER_ARGS)
  requireTypes(k, REGISTRY_TYPES)
  redis.call('ZREM', k.workersExpiry, a.id)
  local removed = redis.call('HDEL', k.workers, a.id)
  expireWithLast(k)
  return removed
end)

register('glidemq_listWorkers', function(keys, args)
  local k = keysFor(keys[1])
  decodeArgs('glidemq_listWorkers', args, NO_ARGS)
  requireTypes(k, REGISTRY_TYPES)
  local now = serverNow()
  prune(k, now, PRUNE_ON_LIST)
  local out = { now }
  local ids = redis.call('ZRANGEBYSCORE', k.workersExpiry, '(' .. now, '+inf', 'LIMIT', 0, MAX_COUNT)
  if #ids == 0 then return out end
  local infos = redis.call('HMGET', k.workers, unpack(ids))
  for i = 1, #ids do
    if infos[i] then out[#out + 1] = infos[i] end
  end
  return out
end)

-- When job `id` became waiting, by its hash: its add time, plus its delay when added delayed.
local function addedAt(k, id)
  if not id then return nil end
  local f = redis.call('HMGET', jobKey(k, id), 'ts', 'delay', 'state')
  local ts = tonumber(f[1])
  if not ts or (f[3] and f[3] ~= 'waiting' and f[3] ~= 'prioritized') then return nil end
  return ts + (tonumber(f[2]) or 0)
end

-- The group's last delivered id of the job stream ('0-0' when there is no group yet: every entry waits).
local function lastDelivered(k)
  local groups = redis.call('XINFO', 'GROUPS', k.stream)
  for _, g in ipairs(groups) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    if name == GROUP then return last or '0-0' end
  end
  return '0-0'
end

register('glidemq_oldestWaiting', function(keys, args)
  local k = keysFor(keys[1])
  decodeArgs('glidemq_oldestWaiting', args, NO_ARGS)
  local now = serverNow()
  local oldest = nil
  local function seen(t)
    if t and (not oldest or t < oldest) then oldest = t end
  end
  if redis.call('EXISTS', k.stream) == 1 then
    local e = redis.call('XRANGE', k.stream, '(' .. lastDelivered(k), '+', 'COUNT', 1)[1]
    if e then seen(tonumber(string.match(e[1], '^(%d+)'))) end
  end
  seen(addedAt(k, redis.call('LINDEX', k.lifo, -1) or nil))
  local first = redis.call('ZRANGE', k.prioritized, 0, 0)[1]
  if first then
    seen(addedAt(k, first))
    local last = redis.call('ZRANGE', k.prioritized, -1, -1, 'WITHSCORES')
    local band = math.floor(tonumber(last[2]) / PRIORITY_SHIFT) * PRIORITY_SHIFT
    seen(addedAt(k, redis.call('ZRANGEBYSCORE', k.prioritized, band, '+inf', 'LIMIT', 0, 1)[1]))
  end
  for _, set in ipairs({ k.readyGroups, k.timedGroups }) do
    for _, gid in ipairs(redis.call('ZRANGE', set, 0, GROUP_SAMPLE - 1)) do
      local _, jobs = groupKeys(k, gid)
      seen(addedAt(k, redis.call('ZRANGE', jobs, 0, 0)[1]))
    end
  end
  if not oldest then return -1 end
  return math.max(0, now - oldest)
end, { 'no-writes' })
end
