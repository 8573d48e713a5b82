--[[ progress.lua — glidemq_updateProgress, glidemq_addLog, glidemq_updateData,
  glidemq_clearLogs, glidemq_extendLocks, glidemq_extendLock
  Writes of a job's progress, logs and data, and the heartbeat of a running processor.
  Progress, logs and data may be written by two kinds of caller:
    - the worker that runs the job, with its claim's fence: the write takes effect only while that
      claim is current, so a stale worker (its job was reclaimed and given to another worker, or
      it finished) changes nothing. A claim that parked its job by its own step
      (glidemq_moveToDelayed, which records the claim's fence as `parkFence`) stays current for
      these writes until the job is claimed again (a claim takes the next fence): BullMQ's step
      pattern updates the data after moveToDelayed. A job delayed by anything else (a backoff
      retry) takes no write from the claim that ran it;
    - a handle that holds no claim (a Queue, or a Job fetched with Job.fromId), with fence '': the
      write takes effect on any job that exists, whatever its state. Such a write never finishes,
      moves or takes a job: it changes only the field or the log it names.
  Neither kind re-creates a removed job: a job hash that is gone is refused (ERR_JOB_NOT_FOUND).
  Every argument, the job hash and the types of the keys written are checked before the first write.

  glidemq_updateProgress
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job.
  ARGV[2]  fence: the fence of the caller's claim (the running worker), or '' for a handle that
           holds no claim.
  ARGV[3]  progress: the progress as JSON text (any JSON value).
  Returns  1, or 0 if the claim is stale (nothing changed).
  Errors   ERR_JOB_NOT_FOUND (the job no longer exists), ERR_INVALID (an argument),
           ERR_WRONG_TYPE (the job or events key holds another type).

  glidemq_addLog
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job.
  ARGV[2]  fence: the fence of the caller's claim, or '' for a handle that holds no claim.
  ARGV[3]  line: the log line.
  ARGV[4]  keep: the newest lines kept (0 = all).
  Returns  how many lines the log holds after the call, or 0 if the claim is stale (nothing changed).
  Errors   ERR_JOB_NOT_FOUND (the job no longer exists), ERR_INVALID (an argument),
           ERR_WRONG_TYPE (the job or its logs key holds another type).

  glidemq_updateData
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job.
  ARGV[2]  fence: the fence of the caller's claim, or '' for a handle that holds no claim.
  ARGV[3]  data: the new data as JSON text (any JSON value); it replaces the old data whole.
  ARGV[4]  maxBytes: the largest data accepted, in bytes (the queue's maxPayloadBytes; 0 = no limit).
  Returns  1, or 0 if the claim is stale (nothing changed).
  Errors   ERR_JOB_NOT_FOUND (the job no longer exists), ERR_TOO_LARGE (data over maxBytes),
           ERR_INVALID (an argument), ERR_WRONG_TYPE (the job key holds another type).

  glidemq_clearLogs
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job.
  ARGV[2]  fence: the fence of the caller's claim, or '' for a handle that holds no claim.
  ARGV[3]  keep: the newest lines kept (0 = the whole log is deleted).
  Returns  how many lines the log holds after the call, or 0 if the claim is stale (nothing changed).
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
  Returns  the ids of the named jobs this consumer no longer owns (nothing was written for them);
           then, when any claim it renewed was revoked (lua/revoke.lua: its `revoked` names this
           claim's fence or an earlier one), one last element: the array of those jobs' ids (the worker aborts their
           runs with reason 'revoked').
  Errors   ERR_INVALID (an argument; an incomplete last group), ERR_WRONG_TYPE.

  glidemq_extendLock — one claim's lock renewed for a duration the caller names (BullMQ's
  job.extendLock(token, duration), for a job fetched by hand, src/engine/consuming/manual-fetch.ts): as
  glidemq_extendLocks renews it, and the claim's terms (lua/activate.lua) record `lockMs` as its
  lock, its maxStalledCount kept, so stalled recovery judges it by the new duration from the
  server's now; a lock shorter than the queue's lockFloor lowers the floor.
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job.
  ARGV[2]  fence: the fence of the claim.
  ARGV[3]  consumer: the claim's owner (a manual fetch's token).
  ARGV[4]  lockMs: the new lock duration in ms (>= 1).
  ARGV[5]  maxStalledCount: recorded with the lock when the claim has no terms (an older claim).
  Returns  1, or 0 when `consumer` does not hold that claim (nothing was written).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE.
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
-- A fence, or '' for a write from a handle that holds no claim.
local FENCE_OR_NONE = ARG.orEmpty(ARG.fence)
local JSON_VALUE = kind('a JSON value', function(v)
  if pcall(cjson.decode, v) then return v end
  return nil
end)
local PROGRESS_ARGS = { 'jobId', ARG.jobId, 'fence', FENCE_OR_NONE, 'progress', JSON_VALUE }
local LOG_ARGS = { 'jobId', ARG.jobId, 'fence', FENCE_OR_NONE, 'line', ARG.any, 'keep', ARG.int(0, MAX_SAFE_INT) }
local DATA_ARGS = { 'jobId', ARG.jobId, 'fence', FENCE_OR_NONE, 'data', JSON_VALUE, 'maxBytes', ARG.int(0, MAX_SAFE_INT) }
local CLEAR_LOGS_ARGS = { 'jobId', ARG.jobId, 'fence', FENCE_OR_NONE, 'keep', ARG.int(0, MAX_SAFE_INT) }
local EXTEND_HEAD = { 'consumer', ARG.nonEmpty }
local EXTEND_CLAIM = { 'jobId', ARG.jobId, 'fence', ARG.fence }
local EXTEND_ONE_ARGS = { 'jobId', ARG.jobId, 'fence', ARG.fence, 'consumer', ARG.nonEmpty,
  'lockMs', ARG.int(1, MAX_SAFE_INT), 'maxStalledCount', ARG.int(0, 1000000000) }
local META_TYPES = { 'meta', 'hash' }
local PROGRESS_TYPES = { 'events', 'stream' }

local function ownedBy(jk, fence)
  local f = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'revoked')
  if f[1] == 'active' and tonumber(f[2]) == fence then return f end
  return nil
end

-- The job a write names: it must exist (never re-created). With a fence the write is the running
-- worker's and needs its claim to be current (running the job, or having parked it by its own
-- step, and not claimed since); with '' it is a handle's, which holds no claim.
-- Returns the job key, or nil for a stale claim. Raises ERR_JOB_NOT_FOUND for a removed job.
local function writableJob(k, id, fence, what)
  local jk = jobKey(k, id)
  if redis.call('EXISTS', jk) == 0 then
    refuse('ERR_JOB_NOT_FOUND', 'job ' .. id .. ' does not exist (removed?): cannot ' .. what)
  end
  if fence == '' then
    requireKeyType(jk, 'hash')
    return jk
  end
  local f = redis.call('HMGET', jk, 'state', 'fence', 'parkFence')
  if tonumber(f[2]) ~= fence then return nil end
  if f[1] ~= 'active' and tonumber(f[3]) ~= fence then return nil end
  return jk
end

register('glidemq_updateProgress', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_updateProgress', args, PROGRESS_ARGS)
  local jk = writableJob(k, a.jobId, a.fence, 'update progress')
  if not jk then return 0 end
  requireTypes(k, PROGRESS_TYPES)
  redis.call('HSET', jk, 'progress', a.progress)
  emit(k, 'progress', a.jobId, 'data', a.progress)
  return 1
end)

register('glidemq_addLog', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_addLog', args, LOG_ARGS)
  local jk = writableJob(k, a.jobId, a.fence, 'add a log line')
  if not jk then return 0 end
  local logs = jk .. ':logs'
  requireKeyType(logs, 'list')
  local n = redis.call('RPUSH', logs, a.line)
  if a.keep > 0 and n > a.keep then
    redis.call('LTRIM', logs, -a.keep, -1)
    n = a.keep
  end
  return n
end)

register('glidemq_updateData', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_updateData', args, DATA_ARGS)
  if a.maxBytes > 0 and #a.data > a.maxBytes then
    refuse('ERR_TOO_LARGE', 'job ' .. a.jobId .. ': the new data is ' .. #a.data .. ' bytes, over the limit of ' ..
      string.format('%.0f', a.maxBytes) .. ' bytes (maxPayloadBytes): store large data elsewhere and keep a reference in the job')
  end
  local jk = writableJob(k, a.jobId, a.fence, 'update its data')
  if not jk then return 0 end
  redis.call('HSET', jk, 'data', a.data)
  return 1
end)

register('glidemq_clearLogs', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_clearLogs', args, CLEAR_LOGS_ARGS)
  local jk = writableJob(k, a.jobId, a.fence, 'clear its logs')
  if not jk then return 0 end
  local logs = jk .. ':logs'
  requireKeyType(logs, 'list')
  if a.keep == 0 then
    redis.call('DEL', logs)
    return 0
  end
  redis.call('LTRIM', logs, -a.keep, -1)
  return redis.call('LLEN', logs)
end)

register('glidemq_extendLocks', function(keys, args)
  local k = keysFor(keys[1])
  local a, claims = decodeArgs('glidemq_extendLocks', args, EXTEND_HEAD, EXTEND_CLAIM)
  local consumer = a.consumer
  -- check phase: every job hash is read before the first write
  local lost, revoked = {}, nil
  for _, c in ipairs(claims) do
    c.jk = jobKey(k, c.jobId)
    local f = ownedBy(c.jk, c.fence)
    if f and f[3] == consumer then
      c.sid = f[4] == 's' and f[5] or nil
      if c.sid then requireTypes(k, STREAM_TYPES) end
      -- a claim revoked while it runs (lua/revoke.lua): the worker is told with the renewal
      if f[6] and tonumber(f[6]) <= c.fence then
        revoked = revoked or {}
        revoked[#revoked + 1] = c.jobId
      end
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
  if revoked then lost[#lost + 1] = revoked end
  return lost
end)

register('glidemq_extendLock', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_extendLock', args, EXTEND_ONE_ARGS)
  -- check phase: the claim, its terms and the floor are read, the key types checked
  local jk = jobKey(k, a.jobId)
  local f = ownedBy(jk, a.fence)
  if not f or f[3] ~= a.consumer then return 0 end
  local sid = f[4] == 's' and f[5] or nil
  if sid then requireTypes(k, STREAM_TYPES) end
  requireTypes(k, META_TYPES)
  local terms = redis.call('HGET', jk, 'terms') or ''
  -- (the plain mark, lua/activate.lua, stays: the job is the same)
  local _, max = string.match(terms, '^(%d+):(%d+)$')
  local mark = ''
  if not max then
    _, max = string.match(terms, PLAIN.match)
    if max then mark = string.sub(terms, -2) end
  end
  max = max or string.format('%.0f', a.maxStalledCount)
  local floor = tonumber(redis.call('HGET', k.meta, 'lockFloor'))
  local now = serverNow()
  redis.call('HSET', jk, 'lockedAt', now, 'terms', string.format('%.0f', a.lockMs) .. ':' .. max .. mark)
  if sid then redis.call('XCLAIM', k.stream, GROUP, a.consumer, 0, sid, 'JUSTID') end
  if floor == nil or a.lockMs < floor then redis.call('HSET', k.meta, 'lockFloor', a.lockMs) end
  return 1
end)
end
