--[[ finish.lua — glidemq_finish, glidemq_finishMany: complete or fail claims, then fetch the next jobs.
  At most one call per job in steady state: the worker's results go in, its next jobs come out.

  glidemq_finish
  KEYS[1]  meta key.
  ARGV     jobId, fence, consumer, now(ms), outcome ('completed'|'failed'), value (return value
           JSON, or the failure reason), retryDelay (ms; -1 = do not retry), fetchCount, keep (the
           retention rule for the outcome, the job's removeOnComplete or removeOnFail: '' keep all |
           '0' remove | 'count:N' | 'age:MS'), durationMs (processing time, counted in the
           per-minute metrics, lua/metrics.lua).
  Returns  {status, next1, next2, ...} where status is 'completed' | 'failed' | 'retried' |
           'delayed' | 'stale' (the caller no longer owns the claim: nothing was changed) |
           'missing' (the job was removed while it ran); next jobs are claim replies (lua/activate.lua).
  Errors   ERR_INVALID for an unknown outcome.

  glidemq_finishMany — the same for several jobs of one consumer in one call (a worker sends the
  results that are ready together), each job exactly as glidemq_finish would finish it.
  KEYS[1]  meta key.
  ARGV     consumer, now(ms), count, fetchCount (next jobs wanted for the whole batch), then
           `count` groups of 7: jobId, fence, outcome, value, retryDelay, keep, durationMs (as above).
  Returns  {status1, ..., statusN, next1, next2, ...}: one status per job in argument order, then
           up to fetchCount next jobs.
  Errors   ERR_INVALID for an unknown outcome (checked for every job before the first write).

  Events   'failed' and 'retrying' always; 'completed' only on a queue with a globalConcurrency
           limit, whose workers wait on the events stream for a finish that frees a slot
           (src/engine/change-waiter.ts). Nothing else reads it, and on the hot path one XADD per
           job is a tenth of a finish's cost; completions are in the completed set and the metrics.
]]
local MAX_RETENTION_REMOVALS = 100

-- Applies a retention spec to a finished set, deleting the job hashes it drops.
local function retain(k, setKey, spec, now, justFinished)
  if spec == '' then return end
  local victims
  if spec == '0' then
    victims = { justFinished }
  else
    local kind, n = string.match(spec, '^(%a+):(%d+)$')
    n = tonumber(n)
    if kind == 'count' then
      victims = redis.call('ZRANGE', setKey, 0, -(n + 1))
      if #victims > MAX_RETENTION_REMOVALS then
        local cut = {}
        for i = 1, MAX_RETENTION_REMOVALS do cut[i] = victims[i] end
        victims = cut
      end
    elseif kind == 'age' then
      victims = redis.call('ZRANGEBYSCORE', setKey, '-inf', now - n, 'LIMIT', 0, MAX_RETENTION_REMOVALS)
    else
      return
    end
  end
  for _, id in ipairs(victims) do
    redis.call('ZREM', setKey, id)
    redis.call('DEL', jobKey(k, id), jobKey(k, id) .. ':logs')
  end
end

-- Stores a finished job's outcome (its state, attempt count, `field` = `value` and finishedOn) in
-- its hash and finished set, then applies retention. A rule that removes the job at once ('0')
-- only removes it: the writes the removal would undo are skipped, and the outcome is still
-- announced by the caller's event.
local function settle(k, jk, id, setKey, keep, now, made, state, field, value)
  if keep == '0' then
    redis.call('DEL', jk, jk .. ':logs')
    return
  end
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src')
  redis.call('HSET', jk, 'attemptsMade', made, 'state', state, field, value, 'finishedOn', now)
  redis.call('ZADD', setKey, now, id)
  retain(k, setKey, keep, now, id)
end

-- Finishes one claim (see glidemq_finish) and returns its status. With `acks` given, a stream
-- claim's entry id is appended to it instead of being acked and deleted here: the caller acks them
-- all in one command and deletes them with dropAcked, before anything reads the pending list again.
-- `announce`: emit the 'completed' event (see the header).
-- `keep` is the retention rule for the outcome.
local function finishOne(k, id, fence, consumer, now, outcome, value, retryDelay, keep, announce, acks)
  local jk = jobKey(k, id)
  local cur
  if outcome == 'completed' and keep == '0' then
    -- the job is deleted: its attempt counts are not needed (two strings fewer each way)
    cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid')
  else
    cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'attemptsMade', 'attempts')
  end
  if not cur[1] then return 'missing' end
  if cur[1] ~= 'active' or cur[2] ~= fence or cur[3] ~= consumer then return 'stale' end
  if acks and cur[4] == 's' and cur[5] then
    acks[#acks + 1] = cur[5]
  else
    releaseClaim(k, id, cur[4], cur[5])
  end
  local made = toInt(cur[6], 0) + 1
  if outcome == 'completed' then
    settle(k, jk, id, k.completed, keep, now, made, 'completed', 'returnvalue', value)
    if announce then emit(k, 'completed', id) end
    return 'completed'
  end
  if retryDelay >= 0 and made < toInt(cur[7], 1) then
    local status
    redis.call('HDEL', jk, 'owner', 'lockedAt', 'src')
    local fields = { 'attemptsMade', made, 'failedReason', value }
    if retryDelay > 0 then
      fields[5], fields[6] = 'state', 'delayed'
      redis.call('HSET', jk, unpack(fields))
      redis.call('ZADD', k.scheduled, now + retryDelay, id)
      groupHoldDelayed(k, id, jk)
      status = 'delayed'
    else
      redis.call('HSET', jk, unpack(fields))
      requeue(k, id, jk)
      status = 'retried'
    end
    emit(k, 'retrying', id, 'reason', value)
    return status
  end
  settle(k, jk, id, k.failed, keep, now, made, 'failed', 'failedReason', value)
  emit(k, 'failed', id, 'reason', value)
  return 'failed'
end

local function badOutcome(id, outcome)
  return fail('ERR_INVALID', 'job ' .. id .. ': finish outcome must be completed or failed, got ' .. tostring(outcome))
end

redis.register_function('glidemq_finish', function(keys, args)
  local k = keysFor(keys[1])
  local id, fence, consumer, now = args[1], args[2], args[3], toInt(args[4], 0)
  local outcome = args[5]
  if outcome ~= 'completed' and outcome ~= 'failed' then return badOutcome(id, outcome) end
  local m = redis.call('HMGET', k.meta, 'paused', 'globalConcurrency')
  local status = finishOne(k, id, fence, consumer, now, outcome, args[6], toInt(args[7], -1), args[9] or '', toInt(m[2], 0) > 0)
  if status ~= 'stale' and status ~= 'missing' then recordMetrics(k, now, status == 'completed', toInt(args[10], 0)) end
  local out = fetchNext(k, consumer, now, toInt(args[8], 0), m)
  table.insert(out, 1, status)
  return out
end)

local MANY_FIELDS = 7
local MANY_HEADER = 4

redis.register_function('glidemq_finishMany', function(keys, args)
  local k = keysFor(keys[1])
  local consumer, now, count, fetchCount = args[1], toInt(args[2], 0), toInt(args[3], 0), toInt(args[4], 0)
  for i = 0, count - 1 do
    local o = MANY_HEADER + i * MANY_FIELDS
    local outcome = args[o + 3]
    if outcome ~= 'completed' and outcome ~= 'failed' then return badOutcome(args[o + 1], outcome) end
  end
  local m = redis.call('HMGET', k.meta, 'paused', 'globalConcurrency')
  local announce = toInt(m[2], 0) > 0
  local statuses, acks = {}, {}
  local nCompleted, msCompleted, nFailed, msFailed = 0, 0, 0, 0
  for i = 0, count - 1 do
    local o = MANY_HEADER + i * MANY_FIELDS
    local status = finishOne(k, args[o + 1], args[o + 2], consumer, now, args[o + 3], args[o + 4],
      toInt(args[o + 5], -1), args[o + 6] or '', announce, acks)
    statuses[i + 1] = status
    if status == 'completed' then
      nCompleted, msCompleted = nCompleted + 1, msCompleted + toInt(args[o + 7], 0)
    elseif status ~= 'stale' and status ~= 'missing' then
      nFailed, msFailed = nFailed + 1, msFailed + toInt(args[o + 7], 0)
    end
  end
  if #acks > 0 then
    redis.call('XACK', k.stream, GROUP, unpack(acks))
    dropAcked(k, acks)
  end
  if nCompleted > 0 then recordMetrics(k, now, true, msCompleted, nCompleted) end
  if nFailed > 0 then recordMetrics(k, now, false, msFailed, nFailed) end
  for _, job in ipairs(fetchNext(k, consumer, now, fetchCount, m)) do statuses[#statuses + 1] = job end
  return statuses
end)
