--[[ progress.lua — glidemq_updateProgress, glidemq_addLog, glidemq_extendLocks
  Writes from a running processor. Each checks that the caller still owns the claim, so a stale
  worker cannot touch a job that was redispatched, and a removed job is never re-created. Every
  argument, the job hashes and the types of the keys written are checked before the first write.

  glidemq_updateProgress
  KEYS[1]  meta key.
  ARGV[1]  jobId: the running job.
  ARGV[2]  fence: the fence of its claim.
  ARGV[3]  progress: the progress as JSON text (any JSON value).
  Returns  1, or 0 if the claim is stale (nothing changed).
  Errors   ERR_JOB_NOT_FOUND (the job no longer exists), ERR_INVALID (an argument),
           ERR_WRONG_TYPE (the job or events key holds another type).

  glidemq_addLog
  KEYS[1]  meta key.
  ARGV[1]  jobId: the running job.
  ARGV[2]  fence: the fence of its claim.
  ARGV[3]  line: the log line.
  ARGV[4]  keep: the newest lines kept (0 = all).
  Returns  the log's length, or 0 if the claim is stale (nothing changed).
  Errors   ERR_JOB_NOT_FOUND (the job no longer exists), ERR_INVALID (an argument),
           ERR_WRONG_TYPE (the job or its logs key holds another type).

  glidemq_extendLocks — the heartbeat: resets the lock of each claim `consumer` still owns (stream
  claim: XCLAIM to itself, which resets the entry's idle time; every claim: lockedAt = the
  server's now, which list claims' stalled checks compare with the server's clock).
  KEYS[1]  meta key.
  ARGV[1]  consumer: the worker's consumer name.
  ARGV[2..]  groups of 2 arguments to the end of ARGV, one per claim, each:
    group.jobId: a job the worker holds.
    group.fence: the fence of its claim.
  Returns  the ids of the named jobs this consumer no longer owns (nothing was written for them).
  Errors   ERR_INVALID (an argument; an incomplete last group), ERR_WRONG_TYPE.
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
local PROGRESS_ARGS = { 'jobId', ARG.jobId, 'fence', ARG.fence, 'progress', kind('a JSON value', function(v)
  if pcall(cjson.decode, v) then return v end
  return nil
end) }
local LOG_ARGS = { 'jobId', ARG.jobId, 'fence', ARG.fence, 'line', ARG.any, 'keep', ARG.int(0, MAX_SAFE_INT) }
local EXTEND_HEAD = { 'consumer', ARG.nonEmpty }
local EXTEND_CLAIM = { 'jobId', ARG.jobId, 'fence', ARG.fence }
local PROGRESS_TYPES = { 'events', 'stream' }

local function ownedBy(jk, fence)
  local f = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid')
  if f[1] == 'active' and tonumber(f[2]) == fence then return f end
  return nil
end

-- A write from a running processor: the job must exist (never re-created) and the claim be current.
-- Returns the job key, or nil for a stale claim. Raises ERR_JOB_NOT_FOUND for a removed job.
local function claimedJob(k, id, fence, what)
  local jk = jobKey(k, id)
  if redis.call('EXISTS', jk) == 0 then
    refuse('ERR_JOB_NOT_FOUND', 'job ' .. id .. ' does not exist (removed?): cannot ' .. what)
  end
  if not ownedBy(jk, fence) then return nil end
  return jk
end

register('glidemq_updateProgress', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_updateProgress', args, PROGRESS_ARGS)
  local jk = claimedJob(k, a.jobId, a.fence, 'update progress')
  if not jk then return 0 end
  requireTypes(k, PROGRESS_TYPES)
  redis.call('HSET', jk, 'progress', a.progress)
  emit(k, 'progress', a.jobId, 'data', a.progress)
  return 1
end)

register('glidemq_addLog', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_addLog', args, LOG_ARGS)
  local jk = claimedJob(k, a.jobId, a.fence, 'add a log line')
  if not jk then return 0 end
  local logs = jk .. ':logs'
  requireKeyType(logs, 'list')
  local n = redis.call('RPUSH', logs, a.line)
  if a.keep > 0 and n > a.keep then redis.call('LTRIM', logs, -a.keep, -1) end
  return n
end)

register('glidemq_extendLocks', function(keys, args)
  local k = keysFor(keys[1])
  local a, claims = decodeArgs('glidemq_extendLocks', args, EXTEND_HEAD, EXTEND_CLAIM)
  local consumer = a.consumer
  -- check phase: every job hash is read before the first write
  local lost = {}
  for _, c in ipairs(claims) do
    c.jk = jobKey(k, c.jobId)
    local f = ownedBy(c.jk, c.fence)
    if f and f[3] == consumer then
      c.sid = f[4] == 's' and f[5] or nil
      if c.sid then requireTypes(k, STREAM_TYPES) end
    else
      c.jk = nil
      lost[#lost + 1] = c.jobId
    end
  end
  local now = serverNow()
  for _, c in ipairs(claims) do
    if c.jk then
      redis.call('HSET', c.jk, 'lockedAt', now)
      if c.sid then redis.call('XCLAIM', k.stream, GROUP, consumer, 0, c.sid, 'JUSTID') end
    end
  end
  return lost
end)
end
