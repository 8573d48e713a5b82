--[[ finish.lua — glidemq_finish: complete or fail the current claim, then fetch the next jobs.
  One call per job in steady state: the worker's result goes in, its next job comes out.
  KEYS[1]  meta key.
  ARGV     jobId, fence, consumer, now(ms), outcome ('completed'|'failed'), value (return value
           JSON, or the failure reason), retryDelay (ms; -1 = do not retry), fetchCount,
           keepCompleted ('' keep all | '0' remove | 'count:N' | 'age:MS'), keepFailed (same form),
           durationMs (processing time, counted in the per-minute metrics, lua/metrics.lua).
  Returns  {status, next1, next2, ...} where status is 'completed' | 'failed' | 'retried' |
           'delayed' | 'stale' (the caller no longer owns the claim: nothing was changed) |
           'missing' (the job was removed while it ran); next jobs are flat field lists.
  Errors   ERR_INVALID for an unknown outcome.
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

-- Stores a finished job's outcome (`fields`, plus finishedOn) in its hash and finished set, then
-- applies retention. A rule that removes the job at once ('0') only removes it: the writes the
-- removal would undo are skipped, and the outcome is still announced by the caller's event.
local function settle(k, jk, id, setKey, keep, now, fields)
  if keep == '0' then
    redis.call('DEL', jk, jk .. ':logs')
    return
  end
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src')
  fields[#fields + 1] = 'finishedOn'
  fields[#fields + 1] = now
  redis.call('HSET', jk, unpack(fields))
  redis.call('ZADD', setKey, now, id)
  retain(k, setKey, keep, now, id)
end

redis.register_function('glidemq_finish', function(keys, args)
  local k = keysFor(keys[1])
  local id, fence, consumer, now = args[1], args[2], args[3], toInt(args[4], 0)
  local outcome, value, retryDelay = args[5], args[6], toInt(args[7], -1)
  local fetchCount = toInt(args[8], 0)
  if outcome ~= 'completed' and outcome ~= 'failed' then
    return fail('ERR_INVALID', 'job ' .. id .. ': finish outcome must be completed or failed, got ' .. tostring(outcome))
  end
  local jk = jobKey(k, id)
  local status
  local cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'attemptsMade', 'attempts', 'src', 'sid')
  if not cur[1] then
    status = 'missing'
  elseif cur[1] ~= 'active' or cur[2] ~= fence or cur[3] ~= consumer then
    status = 'stale'
  else
    releaseClaim(k, id, cur[6], cur[7])
    local made = toInt(cur[4], 0) + 1
    if outcome == 'completed' then
      settle(k, jk, id, k.completed, args[9] or '', now, { 'attemptsMade', made, 'state', 'completed', 'returnvalue', value })
      emit(k, 'completed', id)
      status = 'completed'
    elseif retryDelay >= 0 and made < toInt(cur[5], 1) then
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
    else
      settle(k, jk, id, k.failed, args[10] or '', now, { 'attemptsMade', made, 'state', 'failed', 'failedReason', value })
      emit(k, 'failed', id, 'reason', value)
      status = 'failed'
    end
  end
  if status ~= 'stale' and status ~= 'missing' then recordMetrics(k, now, status == 'completed', toInt(args[11], 0)) end
  local out = fetchNext(k, consumer, now, fetchCount)
  table.insert(out, 1, status)
  return out
end)
