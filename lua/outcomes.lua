--[[ outcomes.lua — storing a job's final outcome (no registered functions here): settle (state,
  finished set, retention), storeFailure (a job failed for good: the failure's writes and events),
  KEEP_RULE (the argument kind of a retention rule) and keepRuleFor (a job's own removeOnFail).
  Shared by glidemq_finish / glidemq_finishMany (lua/finish.lua) and stalled recovery
  (lua/reclaim.lua), so a job failed by a stalled check is stored, kept or removed, announced and
  counted exactly as one its processor failed: the metrics are counted by the callers (one
  recordMetrics per call, lua/metrics-buckets.lua), before their first write they check the keys
  a failure writes (FAILURE_TYPES) and the metrics (checkMetrics).
  `now` is always the calling function's serverNow().
]]
-- Defined in the block below, whose other locals stay inside it (the main chunk may hold at most 200).
local settle, storeFailure, KEEP_RULE, keepRuleFor, FAILURE_TYPES
do
local MAX_RETENTION_REMOVALS = 100

-- The oldest members of finished set `setKey` beyond its newest `n` (at most MAX_RETENTION_REMOVALS).
local function overCount(setKey, n)
  -- (a set never holds 2^32 members; a larger N would reach ZRANGE as '-1e+15', not an index)
  if n >= 4294967295 then return {} end
  local victims = redis.call('ZRANGE', setKey, 0, -(n + 1))
  if #victims > MAX_RETENTION_REMOVALS then
    local cut = {}
    for i = 1, MAX_RETENTION_REMOVALS do cut[i] = victims[i] end
    victims = cut
  end
  return victims
end

-- The members of `setKey` that finished more than `ms` before `now` (at most MAX_RETENTION_REMOVALS).
local function overAge(setKey, ms, now)
  return redis.call('ZRANGEBYSCORE', setKey, '-inf', now - ms, 'LIMIT', 0, MAX_RETENTION_REMOVALS)
end

-- Applies a retention spec to a finished set, deleting the job hashes it drops. Returns true when
-- it dropped `justFinished` itself (a rule such as { age: 0 }).
local function retain(k, setKey, spec, now, justFinished)
  if spec == '' then return false end
  local victims
  if spec == '0' then
    victims = { justFinished }
  else
    local kind, n = string.match(spec, '^(%a+):(%d+)$')
    local ageMs, count = string.match(spec, '^agecount:(%d+):(%d+)$')
    if kind == 'count' then
      victims = overCount(setKey, tonumber(n))
    elseif kind == 'age' then
      victims = overAge(setKey, tonumber(n), now)
    elseif ageMs then
      -- a job stays while it satisfies both rules. Each rule drops a prefix of the set's order
      -- (oldest first, ties by member as in both ranges): their union is the longer of the two.
      local byCount, byAge = overCount(setKey, tonumber(count)), overAge(setKey, tonumber(ageMs), now)
      victims = #byAge > #byCount and byAge or byCount
    else
      return false
    end
  end
  local dropsItself = false
  for _, id in ipairs(victims) do
    redis.call('ZREM', setKey, id)
    local jk = jobKey(k, id)
    redis.call('DEL', jk, jk .. ':logs', jk .. ':deps', jk .. ':processed', jk .. ':failed', jk .. ':ignored')
    if id == justFinished then dropsItself = true end
  end
  return dropsItself
end

-- Stores a finished job's outcome (its state, attempt count, `field` = `value` and finishedOn) in
-- its hash and finished set, then applies retention. A rule that removes the job at once ('0')
-- only removes it: the writes the removal would undo are skipped, and the outcome is still
-- announced by the caller's event. Returns true when the job is gone (removed by its rule).
-- `doomed` (optional): a list to which such a removal of a job without flow children appends its
-- keys, for the caller to delete in one DEL before anything else of the call reads them (one DEL
-- per job costs a batch more than the deletion itself).
settle = function(k, jk, id, setKey, keep, now, made, state, field, value, kids, doomed)
  if keep == '0' then
    -- a parent's dependency keys go with it (its hash's `flow` says so, FLOW.mark); `kids` is
    -- what the caller read of it, nil when it did not read it
    if kids == nil then
      local role = redis.call('HGET', jk, 'flow')
      kids = role ~= false and string.find(role, 'p', 1, true) ~= nil
    end
    if kids then
      redis.call('DEL', jk, jk .. ':logs', jk .. ':deps', jk .. ':processed', jk .. ':failed', jk .. ':ignored')
    elseif doomed then
      doomed[#doomed + 1], doomed[#doomed + 2] = jk, jk .. ':logs'
    else
      redis.call('DEL', jk, jk .. ':logs')
    end
    return true
  end
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src', 'ns', 'nsr', 'terms')
  redis.call('HSET', jk, 'attemptsMade', made, 'state', state, field, value, 'finishedOn', now)
  redis.call('ZADD', setKey, now, id)
  return retain(k, setKey, keep, now, id)
end

-- A retention rule as options.ts encodeRetention writes it.
KEEP_RULE = kind("a retention rule: '' (keep all), '0' (remove), 'count:N', 'age:MS' or 'agecount:MS:N'", function(v)
  if v == '' or v == '0' then return v end
  local rule, n = string.match(v, '^(%a+):(%d+)$')
  if (rule == 'count' or rule == 'age') and tonumber(n) <= MAX_SAFE_INT then return v end
  local ageMs, count = string.match(v, '^agecount:(%d+):(%d+)$')
  if ageMs and tonumber(ageMs) <= MAX_SAFE_INT and tonumber(count) <= MAX_SAFE_INT then return v end
  return nil
end)

-- The keys a failure for good writes (requireTypes): the failed set and the events; a job removed
-- at once (keep '0') is in no set: only the events. `dead`: the dead-letter part of a failure,
-- filled by lua/dead-letters.lua (a field, not a local of its own: the main chunk's locals are few).
FAILURE_TYPES = { kept = { 'failed', 'zset', 'events', 'stream' }, removed = { 'events', 'stream' }, dead = {} }

--[[ Stores the failure for good of job `id` (hash `jk`, out of active delivery state already)
  with `reason`, under retention rule `keep`: its state, attempts made (`made`), failedReason and
  finishedOn, the failed set and retention (settle); then the 'failed' event, and while a
  QueueEvents listens (`listen`) 'retries-exhausted' for a job whose attempts are used up. A queue
  with a dead-letter queue sends it a copy first (FAILURE_TYPES.dead.send, lua/dead-letters.lua; its keys checked by
  the caller's check phase through FAILURE_TYPES.dead.target).
  Returns true when the job is gone (removed by its rule, as settle). ]]
storeFailure = function(k, jk, id, keep, now, made, reason, listen)
  metricsKeys(k).lifetime.failedForGood(k) -- the lifetime count of jobs failed for good (lua/metrics-buckets.lua)
  -- read before settle, which may delete the job
  local exhausted = listen and made >= math.max(toInt(redis.call('HGET', jk, 'attempts'), 1), 1)
  -- a copy to the queue's dead-letter queue, if it has one (lua/dead-letters.lua), while the job is whole
  FAILURE_TYPES.dead.send(k, jk, id, now, made, reason)
  local gone = settle(k, jk, id, k.failed, keep, now, made, 'failed', 'failedReason', reason)
  emit(k, 'failed', id, 'reason', reason)
  if exhausted then emit(k, 'retries-exhausted', id, 'attemptsMade', made) end
  return gone
end

-- A whole number >= 0 as a rule's text (a JSON number may be fractional or huge), or nil.
local function wholeText(n)
  if type(n) ~= 'number' or n ~= n or n < 0 or n > MAX_SAFE_INT then return nil end
  return string.format('%.0f', math.floor(n))
end

--[[ The retention rule (as KEEP_RULE) of the job's own removeOnFail, from its stored options (the
  hash's `opts`, JSON: src/engine/producing/options.ts stores what encodeRetention then encodes, and this
  reads it the same way), or `fallback` when the job names none (the worker's own removeOnFail,
  as a processor's failure takes it). Options that cannot be read count as naming none. ]]
keepRuleFor = function(opts, fallback)
  if not opts then return fallback end
  local ok, o = pcall(cjson.decode, opts)
  if not ok or type(o) ~= 'table' then return fallback end
  local v = o.removeOnFail
  if v == nil or v == cjson.null then return fallback end
  if v == false then return '' end
  if v == true then return '0' end
  if type(v) == 'number' then
    local n = wholeText(v)
    if not n then return fallback end
    return n == '0' and '0' or 'count:' .. n
  end
  if type(v) ~= 'table' then return fallback end
  local count = v.count ~= nil and wholeText(v.count) or nil
  if count == '0' then return '0' end
  local age = v.age ~= nil and type(v.age) == 'number' and wholeText(v.age * 1000) or nil
  if age and count then return 'agecount:' .. age .. ':' .. count end
  if count then return 'count:' .. count end
  if age then return 'age:' .. age end
  return ''
end
end
