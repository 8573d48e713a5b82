--[[ job-edit.lua — moving a job from any handle (a Queue, or a Job fetched with Job.fromId), not only
  from the worker that runs it: glidemq_retryJob, glidemq_retryJobs, glidemq_promoteJob,
  glidemq_promoteJobs, glidemq_changeDelay, glidemq_changePriority.
  (Progress, logs and data, which a handle may also change, are lua/progress.lua's.)
  Fencing: none of these finishes a job, and none takes a job from the worker that holds it. They
  move only jobs no worker holds (a finished job back to waiting, a delayed one to waiting or to
  another due time); changePriority moves a job only while it waits where no worker was given it,
  and on any other job (active, delayed, finished) only stores the priority its next queueing uses.
  A removed job is never re-created: a job hash that is gone is refused (ERR_JOB_NOT_FOUND), and
  the batch functions drop an id whose hash is gone from the set that still names it.
  A job going back to waiting goes where its options say (helpers.lua requeue): its group's line,
  the priority set, the LIFO list or the stream. A paused queue keeps it there: every delivery path
  reads the pause flag, so nothing runs until the queue is resumed. A job of an ordered group that
  held its place in its group's line through its delay becomes waiting in that place (group.lua
  groupEnqueue); a finished group job that is retried takes a new place at the end of its group's
  line (the jobs that waited behind it while it ran are not overtaken by its second run).
  Times are the server's TIME (a due time is the server's now + a delay); the one time a caller
  gives, retryJobs' timestamp, is a user's wish compared with the finishedOn the server stored.
  Every argument, every job hash read and the types of every key written are checked before the
  first write: a refused call changes nothing.

  glidemq_retryJob
  KEYS[1]  meta key.
  ARGV[1]  jobId: the finished job.
  ARGV[2]  state: 'completed' or 'failed', the state the job must be in.
  ARGV[3]  resetAttemptsMade: '1' sets attemptsMade back to 0, '0' keeps it (as BullMQ's retry).
  ARGV[4]  resetAttemptsStarted: '1' counts attemptsStarted from 0 again, '0' keeps it (the fence
           itself only grows: it is stored as the base attemptsStarted counts from).
  Returns  where the job waits now: 'waiting' or 'prioritized'. Emits 'waiting' (prev: the state).
           Its outcome (finishedOn, processedOn, returnvalue, failedReason) is cleared, and a revoke flag (lua/revoke.lua).
  Errors   ERR_JOB_NOT_FOUND (no such job), ERR_JOB_STATE (the job is not in `state`),
           ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_retryJobs
  KEYS[1]  meta key.
  ARGV[1]  state: 'completed' or 'failed', the set whose jobs go back to waiting.
  ARGV[2]  count: jobs moved per call (1..10000).
  ARGV[3]  timestamp: only jobs that finished at or before it (ms since the epoch, compared with
           the finishedOn the server stored), or '' for the server's now.
  Returns  {moved, more, timestamp}: more is 1 when jobs that finished by then are left (call again
           with the returned timestamp, so that jobs retried here and finished again since are not
           taken twice); attemptsMade is kept, as BullMQ's retryJobs keeps it.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_promoteJob
  KEYS[1]  meta key.
  ARGV[1]  jobId: the delayed job.
  Returns  where the job waits now: 'waiting' or 'prioritized'. Emits 'waiting' (prev 'delayed').
  Errors   ERR_JOB_NOT_FOUND (no such job), ERR_JOB_STATE (the job is not delayed),
           ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_promoteJobs
  KEYS[1]  meta key.
  ARGV[1]  count: delayed jobs moved per call (1..10000), the earliest due first, due or not.
  Returns  {promoted, left}: left is how many ids the delayed set still holds.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_changeDelay
  KEYS[1]  meta key.
  ARGV[1]  jobId: the delayed job.
  ARGV[2]  delay: ms from the server's now until the job is due (0: due at once, promoted by the
           next promotion tick).
  Returns  1. Emits 'delayed' (delay: the new delay in ms).
  Errors   ERR_JOB_NOT_FOUND (no such job), ERR_JOB_STATE (the job is not delayed),
           ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_changePriority
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job.
  ARGV[2]  priority: 0 (none) or 1 (served first) .. 2097152.
  ARGV[3]  lifo: '1' for last in, first out (only with priority 0), '0' otherwise.
  A job that waits in the priority set or the LIFO list, or in the stream where no worker was
  given it yet, moves to where the new options put it (a new priority goes behind the jobs of
  that priority already waiting). Any other job keeps its place: it stores the options, which its
  next queueing (a promotion, a retry) uses.
  Returns  the job's state after the call.
  Errors   ERR_JOB_NOT_FOUND (no such job), ERR_INVALID (an argument; priority with lifo; a
           priority or lifo for a group job, which runs in its group's order),
           ERR_WRONG_TYPE (a key it writes holds another type).
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
local FINISHED = ARG.oneOf('completed', 'failed')
local RETRY_ARGS = { 'jobId', ARG.jobId, 'state', FINISHED, 'resetAttemptsMade', ARG.flag, 'resetAttemptsStarted', ARG.flag }
local RETRY_MANY_ARGS = { 'state', FINISHED, 'count', ARG.int(1, MAX_COUNT), 'timestamp', ARG.orEmpty(ARG.ms) }
local PROMOTE_JOB_ARGS = { 'jobId', ARG.jobId }
local PROMOTE_MANY_ARGS = { 'count', ARG.int(1, MAX_COUNT) }
local CHANGE_DELAY_ARGS = { 'jobId', ARG.jobId, 'delay', ARG.ms }
local CHANGE_PRIORITY_ARGS = { 'jobId', ARG.jobId, 'priority', ARG.int(0, MAX_PRIORITY), 'lifo', ARG.flag }
-- Keys written besides a requeue's (activate.lua requireRequeueTypes checks those).
local RETRY_WRITES = { 'completed', 'zset', 'failed', 'zset', 'events', 'stream' }
local DELAYED_WRITES = { 'scheduled', 'zset', 'events', 'stream', 'wake', 'stream' }

-- The job key of `id`, refusing a job that does not exist (a removed job is not re-created).
local function existingJob(k, id, what)
  local jk = jobKey(k, id)
  if redis.call('EXISTS', jk) == 0 then
    refuse('ERR_JOB_NOT_FOUND', 'job ' .. id .. ' does not exist (removed, or removed by retention?): cannot ' .. what)
  end
  requireKeyType(jk, 'hash')
  return jk
end

-- Refuses an operation on a job that is not in the state it needs.
local function wrongState(id, state, need, what, hint)
  refuse('ERR_JOB_STATE', 'job ' .. id .. ' is ' .. (state or 'in no known state') .. ', not ' .. need .. ': ' ..
    what .. ' (' .. hint .. ')')
end

-- A finished job (state `state`, fence `fence` read by the caller) back to waiting: out of its
-- finished set, its outcome cleared, queued where its options say, with a new place in its
-- group's line. Returns where it waits.
local function requeueFinished(k, id, jk, state, fence, resetMade, resetStarted)
  redis.call('ZREM', state == 'completed' and k.completed or k.failed, id)
  local drop = { 'finishedOn', 'processedOn', 'returnvalue', 'failedReason', 'gseq', 'revoked' }
  if resetMade then drop[#drop + 1] = 'attemptsMade' end
  redis.call('HDEL', jk, unpack(drop))
  if resetStarted then redis.call('HSET', jk, 'startsBase', toInt(fence, 0)) end
  local placed = requeue(k, id, jk)
  emit(k, 'waiting', id, 'prev', state)
  return placed
end

-- A delayed job (read by the caller) out of the delayed set, queued where its options say.
local function requeueDelayed(k, id, jk)
  redis.call('ZREM', k.scheduled, id)
  redis.call('HDEL', jk, 'delay')
  local placed = requeue(k, id, jk)
  emit(k, 'waiting', id, 'prev', 'delayed')
  return placed
end

register('glidemq_retryJob', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_retryJob', args, RETRY_ARGS)
  local id = a.jobId
  local jk = existingJob(k, id, 'retry it')
  local f = redis.call('HMGET', jk, 'state', 'grp', 'fence')
  if f[1] ~= a.state then
    local hint = 'it has not finished: wait for it to complete or fail'
    if f[1] == 'completed' or f[1] == 'failed' then hint = "call retry('" .. f[1] .. "') for a " .. f[1] .. ' job' end
    wrongState(id, f[1], a.state, 'retry moves only a ' .. a.state .. ' job back to waiting', hint)
  end
  requireTypes(k, RETRY_WRITES)
  requireRequeueTypes(k, f[2] or nil)
  return requeueFinished(k, id, jk, f[1], f[3], a.resetAttemptsMade, a.resetAttemptsStarted)
end)

register('glidemq_retryJobs', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_retryJobs', args, RETRY_MANY_ARGS)
  requireTypes(k, RETRY_WRITES)
  local cutoff = a.timestamp
  if cutoff == '' then cutoff = serverNow() end
  local set = a.state == 'completed' and k.completed or k.failed
  local ids = redis.call('ZRANGEBYSCORE', set, '-inf', cutoff, 'LIMIT', 0, a.count)
  -- check phase: every job hash is read, and the keys its requeue writes checked
  local plan = {}
  for i, id in ipairs(ids) do
    local jk = jobKey(k, id)
    requireKeyType(jk, 'hash')
    local f = redis.call('HMGET', jk, 'state', 'grp', 'fence')
    if f[1] == a.state then requireRequeueTypes(k, f[2] or nil) end
    plan[i] = f
  end
  local moved = 0
  for i, id in ipairs(ids) do
    local f = plan[i]
    if f[1] == a.state then
      requeueFinished(k, id, jobKey(k, id), f[1], f[3], false, false)
      moved = moved + 1
    else
      redis.call('ZREM', set, id) -- a leftover id (its job is gone, or is not in this state)
    end
  end
  local more = 0
  if #ids >= a.count and redis.call('ZCOUNT', set, '-inf', cutoff) > 0 then more = 1 end
  return { moved, more, cutoff }
end)

register('glidemq_promoteJob', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_promoteJob', args, PROMOTE_JOB_ARGS)
  local id = a.jobId
  local jk = existingJob(k, id, 'promote it')
  local f = redis.call('HMGET', jk, 'state', 'grp')
  if f[1] ~= 'delayed' or not redis.call('ZSCORE', k.scheduled, id) then
    wrongState(id, f[1], 'delayed', 'promote moves only a delayed job to waiting', 'a waiting job needs no promotion')
  end
  requireTypes(k, DELAYED_WRITES)
  requireRequeueTypes(k, f[2] or nil)
  return requeueDelayed(k, id, jk)
end)

register('glidemq_promoteJobs', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_promoteJobs', args, PROMOTE_MANY_ARGS)
  requireTypes(k, DELAYED_WRITES)
  local ids = redis.call('ZRANGE', k.scheduled, 0, a.count - 1)
  -- check phase: every job hash is read, and the keys its requeue writes checked
  local delayed = {}
  for i, id in ipairs(ids) do
    local jk = jobKey(k, id)
    requireKeyType(jk, 'hash')
    local f = redis.call('HMGET', jk, 'state', 'grp')
    delayed[i] = f[1] == 'delayed'
    if delayed[i] then requireRequeueTypes(k, f[2] or nil) end
  end
  local promoted = 0
  for i, id in ipairs(ids) do
    if delayed[i] then
      requeueDelayed(k, id, jobKey(k, id))
      promoted = promoted + 1
    else
      redis.call('ZREM', k.scheduled, id) -- a leftover id: its job is gone or no longer delayed
    end
  end
  return { promoted, redis.call('ZCARD', k.scheduled) }
end)

register('glidemq_changeDelay', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_changeDelay', args, CHANGE_DELAY_ARGS)
  local id = a.jobId
  local jk = existingJob(k, id, 'change its delay')
  local state = redis.call('HGET', jk, 'state')
  if state ~= 'delayed' or not redis.call('ZSCORE', k.scheduled, id) then
    wrongState(id, state, 'delayed', 'changeDelay reschedules only a delayed job',
      'a job that waits or runs has no delay left to change')
  end
  requireTypes(k, DELAYED_WRITES)
  local now = serverNow()
  scheduleDue(k, id, now + a.delay, now)
  redis.call('HSET', jk, 'delay', a.delay)
  emit(k, 'delayed', id, 'delay', a.delay)
  return 1
end)

register('glidemq_changePriority', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_changePriority', args, CHANGE_PRIORITY_ARGS)
  local id, priority, lifo = a.jobId, a.priority, a.lifo
  if priority > 0 and lifo then
    refuse('ERR_INVALID', 'glidemq_changePriority: job ' .. id .. ' cannot be both prioritized and LIFO ' ..
      '(give a priority, or lifo with priority 0)')
  end
  local jk = existingJob(k, id, 'change its priority')
  local f = redis.call('HMGET', jk, 'state', 'grp', 'sid', 'lifo')
  local state, gid, sid = f[1], f[2], f[3]
  if gid and (priority > 0 or lifo) then
    refuse('ERR_INVALID', 'glidemq_changePriority: job ' .. id .. " runs in group " .. gid .. "'s order: it cannot " ..
      'be prioritized or LIFO (a group job waits in its group\'s line)')
  end
  -- where the job waits now, if it waits where it can be moved from (read before any write)
  local from
  if state == 'prioritized' then
    if redis.call('ZSCORE', k.prioritized, id) then from = 'prioritized' end
  elseif state == 'waiting' and not gid then
    if f[4] == '1' then
      if redis.call('LPOS', k.lifo, id) then from = 'lifo' end
    elseif sid then
      -- an entry a worker was given is about to be claimed by it: it keeps its place
      local p = callUnless('NOGROUP', 'XPENDING', k.stream, GROUP, sid, sid, 1)
      if not (p and p[1]) and (priority > 0 or lifo) then from = 'stream' end
    end
  end
  requireRequeueTypes(k, nil)
  if priority > 0 then redis.call('HSET', jk, 'priority', priority) else redis.call('HDEL', jk, 'priority') end
  if lifo then redis.call('HSET', jk, 'lifo', '1') else redis.call('HDEL', jk, 'lifo') end
  if not from then return state end
  if from == 'prioritized' then
    redis.call('ZREM', k.prioritized, id)
  elseif from == 'lifo' then
    redis.call('LREM', k.lifo, 0, id)
  else
    redis.call('XDEL', k.stream, sid)
    redis.call('HDEL', jk, 'sid')
  end
  return enqueueReady(k, id, jk, priority, lifo)
end)
end
