--[[ helpers.lua — shared locals for every glidemq function (no registered functions here).
  Conventions used by all functions:
    KEYS[1]  the queue's meta key `<prefix>:{<queue>}:meta`; every other key of the queue is
             derived from it, so a call touches exactly one cluster slot.
    errors   coded replies `ERR_<CODE> <sentence>` (mapped to typed errors in src/engine/shared/errors.ts).
  Functions validate all input before their first write, so a refused call writes nothing.
]]

local GROUP = 'workers'
local EVENTS_MAXLEN = 1000
local WAKE_MAXLEN = 16
local MAX_PRIORITY = 2097152
local PRIORITY_SHIFT = 2147483648 -- 2^31: score = priority * 2^31 + sequence keeps FIFO per priority

local function fail(code, msg)
  return redis.error_reply(code .. ' ' .. msg)
end

-- The server's clock in ms. Every time a function stores or compares comes from here, never from
-- a caller: callers run on machines whose clocks disagree, and a lock age, a due time or a metrics
-- minute computed from two of them decides wrongly (README "Clocks").
local function serverNow()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Server errors that describe the server's state, not a fault of the function: passed on as they
-- are, so clients react to them as to any command's (retry on LOADING, fail over on READONLY).
local SERVER_STATE_ERRORS = { OOM = true, NOPERM = true, READONLY = true, MASTERDOWN = true, LOADING = true,
  BUSY = true, CLUSTERDOWN = true, TRYAGAIN = true, NOREPLICAS = true, MISCONF = true }

-- Turns an error raised inside function `name` into a coded reply: a refusal raised by args.lua or
-- requireTypes is returned as it is, a WRONGTYPE names the function, and any other Lua error (a bug)
-- becomes ERR_INTERNAL instead of a raw "attempt to index a nil value" with a script trace.
local function codedError(name, e)
  local msg = type(e) == 'table' and (e.err or tostring(e[1])) or tostring(e)
  if string.find(msg, '^ERR_[A-Z_]+ ') then return redis.error_reply(msg) end
  local word = string.match(msg, '^(%u+)[ %-]')
  if word == 'WRONGTYPE' then
    return fail('ERR_WRONG_TYPE', name .. ': a key it uses holds another type than glidemq keeps there ' ..
      '(another program wrote to it): ' .. msg)
  end
  if word and SERVER_STATE_ERRORS[word] then return redis.error_reply(msg) end
  return fail('ERR_INTERNAL', name .. ': ' .. msg .. ' (a glidemq bug: please report it with this message)')
end

-- Registers a library function. Every glidemq function goes through here, so none can answer with
-- a raw Lua error. `flags` as FUNCTION LOAD takes them ({ 'no-writes' } for read-only functions).
local function register(name, fn, flags)
  redis.register_function {
    function_name = name,
    callback = function(keys, args)
      local ok, res = pcall(fn, keys, args)
      if ok then return res end
      return codedError(name, res)
    end,
    flags = flags,
  }
end

-- Refuses a call before its first write when a key it would write holds another type than glidemq
-- keeps there (another program wrote to it). `spec` lists key names of `k` and their types:
-- { 'stream', 'stream', 'scheduled', 'zset', ... }. Returns an error reply, or nil.
local function wrongType(k, spec)
  for i = 1, #spec, 2 do
    local key = k[spec[i]]
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'none' and t ~= spec[i + 1] then
      return fail('ERR_WRONG_TYPE', 'key ' .. key .. ' holds a ' .. t .. ', where glidemq keeps a ' .. spec[i + 1] ..
        ': another program wrote to it (rename or delete the key)')
    end
  end
  return nil
end

-- The same check, raising (for use before the first write, next to decodeArgs).
-- A spec passes at most once per call (remembered on `k`, the call's own key table): a batch
-- checks the keys each job needs as it reads it, and each key costs one TYPE per call.
local function requireTypes(k, spec)
  if rawget(k, spec) then return end
  local bad = wrongType(k, spec)
  if bad then error(bad.err, 0) end
  rawset(k, spec, true)
end

-- Raises unless `key` is absent or of type `want` (a key outside the queue's fixed set: a job hash).
local function requireKeyType(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    error('ERR_WRONG_TYPE key ' .. key .. ' holds a ' .. t .. ', where glidemq keeps a ' .. want ..
      ': another program wrote to it (rename or delete the key)', 0)
  end
end

-- Runs a command whose one expected failure is the server error starting with `code` (WRONGTYPE
-- for a key another program overwrote, NOGROUP for a consumer group that is gone; such a command
-- writes nothing): its reply, or nil for that error. Any other error is raised.
local function callUnless(code, ...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, #code) == code then return nil end
    error(r)
  end
  return r
end

local function baseOf(metaKey)
  return string.sub(metaKey, 1, #metaKey - 5) -- strip ':meta'
end

local KEY_SUFFIX = {
  id = ':id', stream = ':stream', wake = ':wake', scheduled = ':scheduled', prioritized = ':prioritized',
  lifo = ':lifo', listActiveIds = ':list-active-ids', listActive = ':list-active', completed = ':completed',
  failed = ':failed', events = ':events', dedup = ':dedup', schedulers = ':schedulers', jobPrefix = ':job:',
  readyGroups = ':ready-groups', timedGroups = ':timed-groups', groupPrefix = ':group:{',
  producerPrefix = ':producer:', rateLog = ':rate-log', workers = ':workers', workersExpiry = ':workers-expiry',
  removedFinishes = ':removed-finishes', waitingChildren = ':waiting-children', flowOutbox = ':flow-outbox',
  flows = ':flows', flowsDue = ':flows-due', deadOutbox = ':dead-outbox',
}

-- Each name is built on first use and then kept: a call uses a few of the keys, and building
-- every one of them up front is a measurable part of a call's cost.
local KEYS_META = {
  __index = function(t, name)
    local suffix = KEY_SUFFIX[name]
    if not suffix then return nil end
    local v = t.base .. suffix
    rawset(t, name, v)
    return v
  end,
}

local function keysFor(metaKey)
  return setmetatable({ base = baseOf(metaKey), meta = metaKey }, KEYS_META)
end

local function jobKey(k, id)
  return k.jobPrefix .. id
end

local function toInt(v, default)
  local n = tonumber(v)
  if n == nil then return default end
  return math.floor(n)
end

local function isPaused(k)
  return redis.call('HGET', k.meta, 'paused') == '1'
end

-- The id of the newest event: a worker that sees a pause blocks on the events after it, so a
-- resume that lands between its check and its blocking read still wakes it.
local function lastEventId(k)
  local last = redis.call('XREVRANGE', k.events, '+', '-', 'COUNT', 1)
  if last[1] then return last[1][1] end
  return '0-0'
end

local function emit(k, event, jobId, ...)
  redis.call('XADD', k.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'event', event, 'jobId', jobId, ...)
end

-- A stream that already has the group answers BUSYGROUP; that is the normal case.
local function ensureGroup(streamKey)
  local ok = redis.pcall('XGROUP', 'CREATE', streamKey, GROUP, '0', 'MKSTREAM')
  if type(ok) == 'table' and ok.err and not string.find(ok.err, 'BUSYGROUP') then
    error(ok.err)
  end
end

-- A queue seen for the first time has no claims anywhere: its list-active-ids set is complete.
-- (createdAt, not the meta hash, marks it: settings such as globalConcurrency may be written first.)
local function ensureQueue(k)
  if redis.call('HEXISTS', k.meta, 'createdAt') == 0 then
    local fresh = redis.call('EXISTS', k.id) == 0
    redis.call('HSET', k.meta, 'createdAt', redis.call('TIME')[1])
    if fresh then redis.call('HSET', k.meta, 'listActiveSeeded', '1') end
    ensureGroup(k.stream)
    ensureGroup(k.wake)
  end
end

-- Group hooks, assigned in group.lua (declared here so the shared paths below route group jobs):
-- groupEnqueue(k, id, jk, groupId) queues a job in its group; groupRelease(k, id) gives back the
-- group slot a claim held (idempotent: a slot is released at most once per claim).
local groupEnqueue, groupRelease

local function wakeWorkers(k)
  redis.call('XADD', k.wake, 'MAXLEN', WAKE_MAXLEN, '*', 'w', '1')
end

-- Puts job `id` in the scheduled set, due at `at` (server ms). When it becomes the earliest there,
-- a wake entry carrying the ms until it is due (relative to the server's TIME `now`) tells one
-- waiting worker to promote then, instead of on its next tick; a later due time costs nothing.
local function scheduleDue(k, id, at, now)
  local first = redis.call('ZRANGE', k.scheduled, 0, 0, 'WITHSCORES')
  redis.call('ZADD', k.scheduled, at, id)
  if first[2] == nil or at < tonumber(first[2]) then
    redis.call('XADD', k.wake, 'MAXLEN', WAKE_MAXLEN, '*', 'due', math.max(0, at - now))
  end
end

-- Puts a job where workers find it: priority set, LIFO list, or the stream. Returns the state.
-- `extra` (optional) is a flat field/value list written in the same HSET as the state.
-- (state and sid go first: a new job's hash keeps its fields in the order written, and a hash
-- read scans them in that order; a claim and its finish read these two, lua/activate.lua.)
local function enqueueReady(k, id, jk, priority, lifo, extra)
  local state = 'waiting'
  if priority > 0 then
    local seq = redis.call('HINCRBY', k.meta, 'pseq', 1) % PRIORITY_SHIFT
    redis.call('ZADD', k.prioritized, priority * PRIORITY_SHIFT + seq, id)
    state = 'prioritized'
    wakeWorkers(k)
  elseif lifo then
    redis.call('LPUSH', k.lifo, id)
    wakeWorkers(k)
  else
    redis.call('HSET', jk, 'state', state, 'sid', redis.call('XADD', k.stream, '*', 'id', id), unpack(extra or {}))
    return state
  end
  redis.call('HSET', jk, 'state', state, unpack(extra or {}))
  return state
end

-- Re-queues a job at the place its options say (used by retry, promotion and redispatch).
local function requeue(k, id, jk)
  local f = redis.call('HMGET', jk, 'priority', 'lifo', 'grp')
  if f[3] then return groupEnqueue(k, id, jk, f[3]) end
  return enqueueReady(k, id, jk, toInt(f[1], 0), f[2] == '1')
end

-- list-active bookkeeping: every list claim and release keeps the set and the counter together.
local function listClaim(k, id)
  if redis.call('SADD', k.listActiveIds, id) == 1 then
    redis.call('INCR', k.listActive)
  end
end

local function listRelease(k, id)
  redis.call('SREM', k.listActiveIds, id)
  local n = toInt(redis.call('GET', k.listActive), 0)
  if n > 1 then
    redis.call('DECR', k.listActive)
  elseif n ~= 0 then
    redis.call('SET', k.listActive, '0') -- never below zero
  end
  groupRelease(k, id)
end

-- Ends the delivery state of a claim whose `src` and `sid` fields the caller has read: the stream
-- entry is acked and deleted, or the list claim released. The job hash is not touched.
local function releaseClaim(k, id, src, sid)
  if src == 's' then
    if sid then
      redis.call('XACK', k.stream, GROUP, sid)
      redis.call('XDEL', k.stream, sid)
    end
  elseif src then
    listRelease(k, id)
  end
end

-- (Its helpers stay inside the block: the main chunk may hold at most 200 locals, lua/ORDER.)
local dropAcked
do
-- The stream entry id just after `sid` (<ms>-<seq>, as XADD makes them), or nil past the last one.
local function nextStreamId(sid)
  local ms, seq = string.match(sid, '^(%d+)%-(%d+)$')
  if not ms then return nil end
  if seq ~= '18446744073709551615' then
    -- decimal increment of the sequence (a 64-bit number: Lua's doubles would round it)
    local i = #seq
    while i > 0 and string.byte(seq, i) == 57 do i = i - 1 end -- trailing '9's
    if i == 0 then return ms .. '-1' .. string.rep('0', #seq) end
    return ms .. '-' .. string.sub(seq, 1, i - 1) .. string.char(string.byte(seq, i) + 1) .. string.rep('0', #seq - i)
  end
  if ms == '18446744073709551615' then return nil end
  local i = #ms
  while i > 0 and string.byte(ms, i) == 57 do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #ms) .. '-0' end
  return string.sub(ms, 1, i - 1) .. string.char(string.byte(ms, i) + 1) .. string.rep('0', #ms - i) .. '-0'
end

-- Whether stream entry id `a` is newer than `b` (both as XADD makes them: no leading zeros).
local function newerStreamId(a, b)
  local ams, aseq = string.match(a, '^(%d+)%-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)%-(%d+)$')
  if ams ~= bms then
    if #ams ~= #bms then return #ams > #bms end
    return ams > bms
  end
  if #aseq ~= #bseq then return #aseq > #bseq end
  return aseq > bseq
end

-- Deletes the job stream entries `sids`, just acked (`acked`: how many of them the XACK found
-- pending). Every entry older than the oldest pending one was delivered (deliveries go in stream
-- order) and is no longer pending, so it was acked, and glidemq deletes what it acks in the same
-- call: one exact XTRIM MINID therefore deletes exactly those of `sids` older than it, walking the
-- stream's first node once, where XDEL walks it again for every id (its cost grows with the node's
-- deleted entries). With nothing pending, when every one of `sids` was pending in this group
-- until the XACK (so the group delivered every entry up to the newest of them), the same holds
-- for every entry up to that newest one: the trim goes just past it. The count XTRIM answers
-- tells whether all of `sids` were deleted: in the steady state they were, and no id is compared
-- here. Otherwise (some are newer than a claim still held) XDEL takes them all; an id the trim
-- already deleted is a no-op for it. `newestPending` (optional): the newest entry pending in the
-- group right before the XACK (XPENDING's summary), which is then the newest of `sids` (they
-- were all pending, and the XACK left none): comparing every id costs a batch more than the read.
dropAcked = function(k, sids, acked, newestPending)
  local oldest = redis.call('XPENDING', k.stream, GROUP, '-', '+', 1)[1]
  local minId = oldest and oldest[1]
  if not minId and acked == #sids and #sids > 1 then -- (one id: XDEL costs what the trim would)
    local newest = newestPending
    if not newest then
      newest = sids[1]
      for i = 2, #sids do
        if newerStreamId(sids[i], newest) then newest = sids[i] end
      end
    end
    minId = nextStreamId(newest)
  end
  if minId and redis.call('XTRIM', k.stream, 'MINID', minId) >= #sids then return end
  redis.call('XDEL', k.stream, unpack(sids))
end
end

-- Takes a job out of active delivery state (stream entry acked and deleted, or list claim released).
local function releaseActive(k, id, jk)
  local f = redis.call('HMGET', jk, 'src', 'sid')
  releaseClaim(k, id, f[1], f[2])
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src')
end

-- Counts claims held against globalConcurrency: stream pending entries plus list claims.
local function activeCount(k)
  local pending = redis.call('XPENDING', k.stream, GROUP)
  return toInt(pending[1], 0) + toInt(redis.call('GET', k.listActive), 0)
end

local function globalLimit(k)
  return toInt(redis.call('HGET', k.meta, 'globalConcurrency'), 0)
end
