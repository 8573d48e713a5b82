--[[ progress.lua — glidemq_updateProgress, glidemq_addLog, glidemq_extendLocks
  Writes from a running processor. Each checks that the caller still owns the claim, so a stale
  worker cannot touch a job that was redispatched, and a removed job is never re-created.

  glidemq_updateProgress  KEYS[1] meta. ARGV: jobId, fence, progress(JSON). Returns 1, or 0 if stale.
  glidemq_addLog          KEYS[1] meta. ARGV: jobId, fence, line, keep(max lines). Returns the log
                          length, or 0 if stale.
  glidemq_extendLocks     KEYS[1] meta. ARGV: consumer, now(ms), then pairs (jobId, fence).
                          Resets the idle time of each owned claim (stream: XCLAIM to itself;
                          list: lockedAt). Returns the ids this consumer no longer owns.
  Errors: ERR_JOB_NOT_FOUND when the job no longer exists (progress, log).
]]
local function ownedBy(jk, fence)
  local f = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid')
  if f[1] == 'active' and f[2] == fence then return f end
  return nil
end

-- A write from a running processor: the job must exist (never re-created) and the claim be current.
-- Returns the job key, or nil and the reply to give (an error, or 0 for a stale claim).
local function claimedJob(k, id, fence, what)
  local jk = jobKey(k, id)
  if redis.call('EXISTS', jk) == 0 then
    return nil, fail('ERR_JOB_NOT_FOUND', 'job ' .. id .. ' does not exist (removed?): cannot ' .. what)
  end
  if not ownedBy(jk, fence) then return nil, 0 end
  return jk
end

redis.register_function('glidemq_updateProgress', function(keys, args)
  local k = keysFor(keys[1])
  local jk, refusal = claimedJob(k, args[1], args[2], 'update progress')
  if not jk then return refusal end
  redis.call('HSET', jk, 'progress', args[3])
  emit(k, 'progress', args[1], 'data', args[3])
  return 1
end)

redis.register_function('glidemq_addLog', function(keys, args)
  local k = keysFor(keys[1])
  local jk, refusal = claimedJob(k, args[1], args[2], 'add a log line')
  if not jk then return refusal end
  local n = redis.call('RPUSH', jk .. ':logs', args[3])
  local keep = toInt(args[4], 0)
  if keep > 0 and n > keep then redis.call('LTRIM', jk .. ':logs', -keep, -1) end
  return n
end)

redis.register_function('glidemq_extendLocks', function(keys, args)
  local k = keysFor(keys[1])
  local consumer, now = args[1], toInt(args[2], 0)
  local lost = {}
  for i = 3, #args, 2 do
    local id, fence = args[i], args[i + 1]
    local jk = jobKey(k, id)
    local f = ownedBy(jk, fence)
    if f and f[3] == consumer then
      redis.call('HSET', jk, 'lockedAt', now)
      if f[4] == 's' and f[5] then
        redis.call('XCLAIM', k.stream, GROUP, consumer, 0, f[5], 'JUSTID')
      end
    else
      lost[#lost + 1] = id
    end
  end
  return lost
end)
