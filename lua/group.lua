--[[ group.lua — shared locals: group state (no registered functions here).
  A job added with a group waits in its group instead of the stream, and is popped and activated
  in the same call as priority/LIFO jobs (src 'g': a list claim, tracked in list-active-ids, so
  stalled recovery finds it and its release goes through listRelease → groupRelease).
  Keys (all in the queue's slot):
    <base>:group:{<id>}        hash, the group's state:
        maxConcurrency, active, h:<jobId> (one field per slot holder, value = consumer),
        rateMax, rateDuration, windowStart, windowCount        (fixed window from its first start),
        capacity, refillRate (tokens/s), tokens, lastRefill     (token bucket, one token per start),
        ordered ('1': one at a time; a job delayed by a retry backoff or a parked step holds it: heldBy),
        seq (ordering sequence: a job's place in line, kept across its retries and stalls),
        delayed (how many delayed jobs hold their place in the line, see below; absent = 0).
    <base>:group:{<id>}:jobs   zset, the group's line, score = seq (lowest runs first): its waiting
        jobs, and in an ordered group also the jobs added to it with a delay. Those take their seq
        when they are added and wait out their delay in the line (state 'delayed', also in the
        scheduled set): nothing after them can start, because a group whose line starts with a
        delayed job starts nothing (groupFull); on promotion they become waiting in their place.
        Meta's groupWaiting counts the waiting ones only, the group's `delayed` the others.
        (A plain group's delayed job joins the line when it is promoted: it blocks nothing.)
    <base>:ready-groups        zset of groups that may start a job now, score = turn (round robin).
    <base>:timed-groups        zset of groups held by a rate window or empty bucket, score = ms.
  Invariant: a group with waiting jobs is in ready-groups, in timed-groups, or parked because it is
  full (maxConcurrency reached, held by heldBy, or its line starts with a delayed job); each path
  that frees a slot, adds a job or ends a hold calls touchGroup.
  `active` changes only together with an h:<jobId> field, so a double release cannot drift it.
  Time: every `now` these helpers take is the server's TIME, read by the calling function with
  serverNow() (helpers.lua) and passed down, never a caller's clock: windowStart, lastRefill and
  the timed-groups scores are server times, so workers whose clocks disagree still share one clock
  for a group's limits. A wait a client needs is returned relative (glidemq_promote's nextDueIn).
  Key types: a function that may put a job into a group (glidemq_add; a retry, promotion or stall
  that requeues one) calls groupRequireTypes(k, groupId) for each such group before its first
  write: it raises ERR_WRONG_TYPE when a group key, or a queue key these helpers write, holds
  another type. Paths that only schedule groups already there (takeGroupJob, promoteTimedGroups,
  a slot given back by finish or remove) never raise on such a key halfway through a call: they
  take the group out of ready- and timed-groups and leave its keys as another program wrote them.
  groupParse checks a job's group spec in full (glidemq_add validates with it before writing).
]]
-- Defined in the block below, whose other locals stay inside it (the main chunk may hold at most 200).
local groupKeys, readGroup, concurrencyLimit, groupRequireTypes, groupHoldDelayed, groupHoldPlace, groupForget,
  promoteTimedGroups, groupConfigure, groupParse, takeGroupJob, nextTimedGroup
do
local GROUP_SCAN = 50   -- ready groups examined per pop
local HOLDER_CHECK = 100
-- Group spec fields (as groups.ts encodes them) and the refill rate range (tokens/s; groups.ts agrees).
local GROUP_SPEC = { keys = { id = true, maxConcurrency = true, rateMax = true, rateDuration = true,
  capacity = true, refillRate = true, ordered = true }, minRefill = 0.000001, maxRefill = 1000000,
  maxWhole = '9007199254740991' } -- MAX_SAFE_INT as text (string.* is not loaded while the library loads)

groupKeys = function(k, gid)
  local gk = k.groupPrefix .. gid .. '}'
  return gk, gk .. ':jobs'
end

-- Queue keys the group helpers write, and their types.
local GROUP_QUEUE_TYPES = { 'meta', 'hash', 'readyGroups', 'zset', 'timedGroups', 'zset', 'wake', 'stream' }

--[[ Raises ERR_WRONG_TYPE unless the keys a job joining group `gid` may write (the group's hash and
  job line, and the queue's meta, ready-groups, timed-groups and wake keys) are absent or of the
  type glidemq keeps there. Call it before the first write of a function that may enqueue into,
  release or re-queue a group job (gid nil: the queue keys only). Each key is checked once per call
  (remembered on `k`). ]]
groupRequireTypes = function(k, gid)
  requireTypes(k, GROUP_QUEUE_TYPES)
  if not gid then return end
  local seen = rawget(k, 'groupTypesChecked')
  if not seen then
    seen = {}
    rawset(k, 'groupTypesChecked', seen)
  end
  if not seen[gid] then
    local gk, jobs = groupKeys(k, gid)
    requireKeyType(gk, 'hash')
    requireKeyType(jobs, 'zset')
    seen[gid] = true
  end
end

-- A command on a group key (or a job hash a group names) that another program may have
-- overwritten: its reply, or nil on WRONGTYPE (which writes nothing). Other errors are raised.
local function groupTry(...)
  return callUnless('WRONGTYPE', ...)
end

local GROUP_FIELDS = { 'maxConcurrency', 'active', 'ordered', 'heldBy', 'rateMax', 'rateDuration',
  'windowStart', 'windowCount', 'capacity', 'refillRate', 'tokens', 'lastRefill', 'delayed' }

-- The group's settings and counters, or nil when its hash holds another type. (This name shadows
-- args.lua's readGroup from here on; args.lua's decodeArgs keeps its own.)
readGroup = function(gk)
  local v = groupTry('HMGET', gk, unpack(GROUP_FIELDS))
  if not v then return nil end
  local g = {}
  for i, name in ipairs(GROUP_FIELDS) do g[name] = v[i] end
  return g
end

concurrencyLimit = function(g)
  if g.ordered == '1' then return 1 end
  return toInt(g.maxConcurrency, 0)
end

-- Drops holder fields whose job no longer holds the slot (a safety net; normal paths release).
local function healHolders(k, gid, gk)
  local all = redis.call('HGETALL', gk)
  local dropped, checked = 0, 0
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'h:' then
      checked = checked + 1
      if checked > HOLDER_CHECK then break end
      local id = string.sub(f, 3)
      local j = groupTry('HMGET', jobKey(k, id), 'state', 'grp', 'src') or {}
      if j[1] ~= 'active' or j[2] ~= gid or j[3] ~= 'g' then
        redis.call('HDEL', gk, f)
        dropped = dropped + 1
      end
    end
  end
  if dropped > 0 then
    local n = toInt(redis.call('HGET', gk, 'active'), 0) - dropped
    if n < 0 then n = 0 end
    redis.call('HSET', gk, 'active', n)
  end
  return dropped
end

-- True when the group's line starts with a delayed job holding its place (see the header), or
-- the line holds another type (nothing can start from it).
local function lineHeld(k, gid)
  local _, jobs = groupKeys(k, gid)
  local head = groupTry('ZRANGE', jobs, 0, 0)
  if not head then return true end
  if not head[1] then return false end
  return groupTry('HGET', jobKey(k, head[1]), 'state') == 'delayed'
end

-- One delayed job less holds its place in the line of the group whose hash is `gk`.
local function unholdPlace(gk)
  local n = toInt(groupTry('HGET', gk, 'delayed'), 0) - 1
  if n > 0 then groupTry('HSET', gk, 'delayed', n) else groupTry('HDEL', gk, 'delayed') end
end

-- True when no slot is free (concurrency reached, an ordered group held by a pending retry, or a
-- line that starts with a delayed job).
local function groupFull(k, gid, gk, g, heal)
  if g.ordered == '1' and g.heldBy then
    if groupTry('HGET', jobKey(k, g.heldBy), 'state') == 'delayed' then return true end
    redis.call('HDEL', gk, 'heldBy') -- the holding job was removed or moved on
    g.heldBy = nil
  end
  if toInt(g.delayed, 0) > 0 and lineHeld(k, gid) then return true end
  local limit = concurrencyLimit(g)
  if limit <= 0 or toInt(g.active, 0) < limit then return false end
  if heal and healHolders(k, gid, gk) > 0 then
    g.active = redis.call('HGET', gk, 'active')
    return toInt(g.active, 0) >= limit
  end
  return true
end

-- Tokens in the bucket at `now` (nil when the group has no bucket). Never refills backwards.
local function bucketAt(g, now)
  local cap = tonumber(g.capacity) or 0
  if cap <= 0 then return nil end
  local tokens = tonumber(g.tokens) or cap
  local last = tonumber(g.lastRefill) or now
  if now > last then tokens = math.min(cap, tokens + (now - last) * (tonumber(g.refillRate) or 0) / 1000) end
  return tokens, math.max(now, last)
end

-- 'ok' | 'full' | 'wait', whenMs: may the group start one job at `now`?
local function groupGate(k, gid, gk, g, now, heal)
  if groupFull(k, gid, gk, g, heal) then return 'full' end
  local rmax, rdur = toInt(g.rateMax, 0), toInt(g.rateDuration, 0)
  if rmax > 0 and rdur > 0 then
    local ws = tonumber(g.windowStart)
    if ws and now < ws + rdur and toInt(g.windowCount, 0) >= rmax then return 'wait', ws + rdur end
  end
  local tokens, at = bucketAt(g, now)
  if tokens and tokens < 1 then
    local rate = tonumber(g.refillRate) or 0
    if rate <= 0 then return 'full' end
    return 'wait', at + math.ceil((1 - tokens) * 1000 / rate)
  end
  return 'ok'
end

-- How many jobs the group could start at `now` (for waking that many blocked workers).
local function groupRoom(g, now, waiting)
  local room = waiting
  local limit = concurrencyLimit(g)
  if limit > 0 then room = math.min(room, limit - toInt(g.active, 0)) end
  local rmax, rdur = toInt(g.rateMax, 0), toInt(g.rateDuration, 0)
  if rmax > 0 and rdur > 0 then
    local ws = tonumber(g.windowStart)
    local used = (ws and now < ws + rdur) and toInt(g.windowCount, 0) or 0
    room = math.min(room, rmax - used)
  end
  local tokens = bucketAt(g, now)
  if tokens then room = math.min(room, math.floor(tokens)) end
  if room > WAKE_MAXLEN then room = WAKE_MAXLEN end
  if room < 0 then room = 0 end
  return room
end

-- Makes a group that has waiting jobs findable again (unless a time gate or a full slot holds it)
-- and wakes up to `wakes` blocked workers for it. A group whose keys hold another type is taken
-- out of ready- and timed-groups (nothing can run from it).
local function touchGroup(k, gid, wakes)
  local gk, jobs = groupKeys(k, gid)
  local waiting = groupTry('ZCARD', jobs)
  if not waiting or waiting == 0 then
    redis.call('ZREM', k.readyGroups, gid)
    redis.call('ZREM', k.timedGroups, gid)
    return
  end
  if redis.call('ZSCORE', k.timedGroups, gid) then return end
  local g = readGroup(gk)
  if not g or groupFull(k, gid, gk, g, true) then
    redis.call('ZREM', k.readyGroups, gid)
    if not g then redis.call('ZREM', k.timedGroups, gid) end
    return
  end
  if not redis.call('ZSCORE', k.readyGroups, gid) then
    redis.call('ZADD', k.readyGroups, redis.call('HINCRBY', k.meta, 'groupTurn', 1), gid)
  end
  for _ = 1, wakes do wakeWorkers(k) end
end

-- Puts a job in its group's line. Its caller checked the keys with groupRequireTypes before its
-- first write; the check here (free when it did) only keeps this helper from writing into a
-- wrong-typed key.
groupEnqueue = function(k, id, jk, gid)
  groupRequireTypes(k, gid)
  local gk, jobs = groupKeys(k, gid)
  local f = redis.call('HMGET', jk, 'gseq', 'state')
  local seq = f[1]
  if not seq then
    seq = redis.call('HINCRBY', gk, 'seq', 1)
    redis.call('HSET', jk, 'gseq', seq)
  end
  if redis.call('ZADD', jobs, seq, id) == 1 then
    redis.call('HINCRBY', k.meta, 'groupWaiting', 1)
  elseif f[2] == 'delayed' then
    -- it held its place in the line while delayed (groupHoldPlace): it now waits there
    unholdPlace(gk)
    redis.call('HINCRBY', k.meta, 'groupWaiting', 1)
  end
  redis.call('HSET', jk, 'state', 'waiting')
  if redis.call('HGET', gk, 'heldBy') == id then redis.call('HDEL', gk, 'heldBy') end
  touchGroup(k, gid, 1)
  return 'waiting'
end

groupRelease = function(k, id)
  local gid = groupTry('HGET', jobKey(k, id), 'grp')
  if not gid then return end
  local gk = groupKeys(k, gid)
  if groupTry('HDEL', gk, 'h:' .. id) == 1 then
    local n = toInt(redis.call('HGET', gk, 'active'), 0) - 1
    if n < 0 then n = 0 end
    redis.call('HSET', gk, 'active', n)
  end
  touchGroup(k, gid, 1)
end

-- An ordered group waits for a job that is delayed (a retry backoff, a parked step) before it starts the next job.
groupHoldDelayed = function(k, id, jk)
  local gid = redis.call('HGET', jk, 'grp')
  if not gid then return end
  local gk = groupKeys(k, gid)
  if groupTry('HGET', gk, 'ordered') == '1' then
    redis.call('HSET', gk, 'heldBy', id)
    redis.call('ZREM', k.readyGroups, gid)
  end
end

--[[ A delayed job just added to group `gid` (its hash written, state 'delayed', in the scheduled
  set): in an ordered group it takes its seq now and holds its place in the line while it waits
  for its time, so a job added after it cannot start before it has run (glidemq_promote makes it
  waiting in its place: groupEnqueue). Several delayed jobs keep the order they were added in,
  whatever their due times. In a plain group it does nothing: the job joins the line when it is
  promoted. The caller checked the group's keys (groupRequireTypes) before its first write. The
  line's head is unchanged (the job goes to its end), so the group's place in ready-groups is too. ]]
groupHoldPlace = function(k, id, jk, gid)
  local gk, jobs = groupKeys(k, gid)
  if redis.call('HGET', gk, 'ordered') ~= '1' then return end
  local seq = redis.call('HINCRBY', gk, 'seq', 1)
  redis.call('HSET', jk, 'gseq', seq)
  if redis.call('ZADD', jobs, seq, id) == 1 then redis.call('HINCRBY', gk, 'delayed', 1) end
end

-- Takes a job out of its group's line (removeJob, drain, clean): a waiting one, or a delayed one
-- holding its place; frees a hold it had on the group (and wakes a worker for the group then).
-- `lineGid` names the group whose line lists `id` when its hash is gone (a stale entry of that
-- line, counted as waiting as takeGroupJob counts one).
groupForget = function(k, id, jk, lineGid)
  local f = redis.call('HMGET', jk, 'grp', 'state')
  local gid = f[1] or lineGid
  if not gid then return end
  local gk, jobs = groupKeys(k, gid)
  local freed = false
  if groupTry('ZREM', jobs, id) == 1 then
    if f[2] == 'delayed' then
      unholdPlace(gk)
      freed = true
    else
      redis.call('HINCRBY', k.meta, 'groupWaiting', -1)
    end
  end
  if groupTry('HGET', gk, 'heldBy') == id then
    redis.call('HDEL', gk, 'heldBy')
    freed = true
  end
  touchGroup(k, gid, freed and 1 or 0)
end

-- Moves groups whose rate window or bucket allows a start again (at server time `now`) from
-- timed- to ready-groups. Returns how many blocked workers were woken.
promoteTimedGroups = function(k, now)
  local due = redis.call('ZRANGEBYSCORE', k.timedGroups, '-inf', now, 'LIMIT', 0, 100)
  local woke = 0
  for _, gid in ipairs(due) do
    redis.call('ZREM', k.timedGroups, gid)
    local gk, jobs = groupKeys(k, gid)
    local g, waiting = readGroup(gk), groupTry('ZCARD', jobs)
    if g and waiting then
      local room = groupRoom(g, now, waiting)
      touchGroup(k, gid, room)
      woke = woke + room
    else
      redis.call('ZREM', k.readyGroups, gid)
    end
  end
  return woke
end

-- Applies the group settings a job carries (the latest add that names a setting wins). `spec` is
-- one groupParse returned; `now` the server time (a new bucket starts full at it).
groupConfigure = function(k, spec, now)
  groupRequireTypes(k, spec.id)
  local gk = groupKeys(k, spec.id)
  if spec.maxConcurrency then redis.call('HSET', gk, 'maxConcurrency', spec.maxConcurrency) end
  if spec.rateMax then
    if spec.rateMax == 0 then
      redis.call('HDEL', gk, 'rateMax', 'rateDuration', 'windowStart', 'windowCount')
    else
      redis.call('HSET', gk, 'rateMax', spec.rateMax, 'rateDuration', spec.rateDuration)
    end
  end
  if spec.capacity then
    if spec.capacity == 0 then
      redis.call('HDEL', gk, 'capacity', 'refillRate', 'tokens', 'lastRefill')
    else
      local tokens = tonumber(redis.call('HGET', gk, 'tokens'))
      redis.call('HSET', gk, 'capacity', spec.capacity, 'refillRate', spec.refillRate)
      if not tokens then
        redis.call('HSET', gk, 'tokens', spec.capacity, 'lastRefill', now)
      elseif tokens > spec.capacity then
        redis.call('HSET', gk, 'tokens', spec.capacity)
      end
    end
  end
  if spec.ordered ~= nil then redis.call('HSET', gk, 'ordered', spec.ordered and '1' or '0') end
  if redis.call('HEXISTS', gk, 'active') == 0 then redis.call('HSET', gk, 'active', 0, 'seq', 0) end
end

--[[ Checks a job's group spec (JSON text, as groups.ts encodeGroup writes it) in full: known fields
  only; id 1..MAX_ID_LEN bytes without "{", "}", whitespace or control characters; counts whole
  and finite (0..2^53-1; rateDuration from 1 ms); refillRate a finite number of tokens per second
  within GROUP_SPEC's range; ordered a boolean. Returns the decoded spec, or nil and a message
  that names the field (the caller prefixes the job and raises ERR_INVALID before any write). ]]
groupParse = function(text)
  local ok, spec = pcall(cjson.decode, text)
  if not ok or type(spec) ~= 'table' then return nil, 'group must be a JSON object like {"id":"customer-42"}' end
  for key, v in pairs(spec) do
    if not GROUP_SPEC.keys[key] then
      return nil, 'unknown group option ' .. showArg(tostring(key)) ..
        ' (known: id, maxConcurrency, rateMax, rateDuration, capacity, refillRate, ordered)'
    end
    if v == cjson.null then spec[key] = nil end
  end
  local id = spec.id
  if type(id) ~= 'string' or id == '' or #id > MAX_ID_LEN or string.find(id, '[{}%s%c]') then
    return nil, 'group.id must be 1 to ' .. MAX_ID_LEN .. ' bytes without "{", "}", whitespace or control characters'
  end
  -- A finite number within [min, max] (and whole when asked); absent is fine.
  local function inRange(name, min, max, whole)
    local v = spec[name]
    if v == nil then return true end
    return type(v) == 'number' and v >= min and v <= max and (not whole or v == math.floor(v))
  end
  if not inRange('maxConcurrency', 0, MAX_SAFE_INT, true) then
    return nil, 'group.maxConcurrency must be a whole number from 0 to ' .. GROUP_SPEC.maxWhole
  end
  if not inRange('rateMax', 0, MAX_SAFE_INT, true) then
    return nil, 'group.rateMax must be a whole number from 0 to ' .. GROUP_SPEC.maxWhole
  end
  if not inRange('rateDuration', 1, MAX_SAFE_INT, true) then
    return nil, 'group.rateDuration must be a whole number of ms from 1 to ' .. GROUP_SPEC.maxWhole
  end
  if spec.rateDuration and spec.rateMax == nil then return nil, 'group.rateDuration is only meaningful with group.rateMax' end
  if spec.rateMax and spec.rateMax > 0 and not spec.rateDuration then
    return nil, 'group.rateMax needs group.rateDuration (the window length)'
  end
  if not inRange('capacity', 0, MAX_SAFE_INT, true) then
    return nil, 'group.tokenBucket.capacity must be a whole number from 0 to ' .. GROUP_SPEC.maxWhole
  end
  if not inRange('refillRate', GROUP_SPEC.minRefill, GROUP_SPEC.maxRefill, false) then
    return nil, 'group.tokenBucket.refillRate must be a number of tokens per second from ' ..
      GROUP_SPEC.minRefill .. ' to ' .. GROUP_SPEC.maxRefill
  end
  if spec.refillRate and spec.capacity == nil then return nil, 'group.tokenBucket.refillRate needs group.tokenBucket.capacity' end
  if spec.capacity and spec.capacity > 0 and not spec.refillRate then
    return nil, 'group.tokenBucket.capacity needs group.tokenBucket.refillRate (tokens per second)'
  end
  if spec.ordered ~= nil and type(spec.ordered) ~= 'boolean' then return nil, 'group.ordered must be true or false' end
  if spec.ordered and spec.maxConcurrency and spec.maxConcurrency > 1 then
    return nil, 'an ordered group runs one job at a time: group.maxConcurrency must be 1 or absent'
  end
  return spec
end

-- Pops the first job of the first group that may start one at server time `now`, taking its slot,
-- rate window count and token. Returns the job id (the caller activates it in the same call) or nil.
-- A ready group whose keys hold another type is dropped from ready-groups and skipped.
takeGroupJob = function(k, consumer, now)
  promoteTimedGroups(k, now)
  for _ = 1, GROUP_SCAN do
    local top = redis.call('ZRANGE', k.readyGroups, 0, 0)
    local gid = top[1]
    if not gid then return nil end
    local gk, jobs = groupKeys(k, gid)
    local g = readGroup(gk)
    local verdict, when = 'full', nil
    if g then verdict, when = groupGate(k, gid, gk, g, now, true) end
    if verdict == 'ok' then
      -- the head of the line; an entry whose job is gone is dropped; a delayed job holding its
      -- place ends the search (nothing after it may start)
      local id
      while true do
        local head = groupTry('ZRANGE', jobs, 0, 0)
        if not head or not head[1] then break end
        local state = groupTry('HGET', jobKey(k, head[1]), 'state')
        if state == 'delayed' then break end
        redis.call('ZREM', jobs, head[1])
        redis.call('HINCRBY', k.meta, 'groupWaiting', -1)
        if state then
          id = head[1]
          break
        end
      end
      if id then
        local rmax, rdur = toInt(g.rateMax, 0), toInt(g.rateDuration, 0)
        if rmax > 0 and rdur > 0 then
          local ws = tonumber(g.windowStart)
          if not ws or now >= ws + rdur then
            redis.call('HSET', gk, 'windowStart', now, 'windowCount', 1)
          else
            redis.call('HINCRBY', gk, 'windowCount', 1)
          end
        end
        local tokens, at = bucketAt(g, now)
        if tokens then redis.call('HSET', gk, 'tokens', tokens - 1, 'lastRefill', at) end
        if redis.call('HSET', gk, 'h:' .. id, consumer) == 1 then redis.call('HINCRBY', gk, 'active', 1) end
        -- the group's place: to the back of the ready line, or timed, or parked
        if redis.call('ZCARD', jobs) == 0 then
          redis.call('ZREM', k.readyGroups, gid)
        else
          local v2, when2 = groupGate(k, gid, gk, readGroup(gk), now, false)
          redis.call('ZREM', k.readyGroups, gid)
          if v2 == 'ok' then
            redis.call('ZADD', k.readyGroups, redis.call('HINCRBY', k.meta, 'groupTurn', 1), gid)
          elseif v2 == 'wait' then
            redis.call('ZADD', k.timedGroups, when2, gid)
          end
        end
        return id
      end
      redis.call('ZREM', k.readyGroups, gid)
    elseif verdict == 'wait' then
      redis.call('ZREM', k.readyGroups, gid)
      redis.call('ZADD', k.timedGroups, when, gid)
    else
      redis.call('ZREM', k.readyGroups, gid) -- parked until a slot is released (or its keys are unusable)
    end
  end
  return nil
end

-- The earliest server time (ms) a timed group may run again, or nil. Absolute: callers return it
-- relative to their now.
nextTimedGroup = function(k)
  local first = redis.call('ZRANGE', k.timedGroups, 0, 0, 'WITHSCORES')
  if first[2] then return toInt(first[2], nil) end
  return nil
end
end
