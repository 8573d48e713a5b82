--[[ restore.lua — storing jobs brought from elsewhere (glidemq import-bullmq), each in the state it
  had there, with its fields, once.

  glidemq_restore — stores jobs under the ids given, each in its state: a waiting, prioritized or
  delayed job is added as glidemq_add adds one (its hash, its place, the 'added' event); a completed
  or failed job is stored finished (its hash with its outcome, attempts and times, and its place in
  the finished set, scored by its finishedOn), without events, metrics or retention. A job's logs
  are appended to its logs list. A job whose id exists already is not written again: a second run
  of the same import stores nothing twice.
  KEYS[1]  meta key of the queue.
  ARGV[1]  count: how many jobs follow (0..10000), each a group of 14 arguments:
    group.jobId: the id (as a custom id of glidemq_add: 1..256 bytes, no ':', '{', '}',
           whitespace or control characters, not a whole number).
    group.state: waiting | prioritized | delayed | completed | failed.
    group.name: the job's name (1..1024 bytes).
    group.data: the job's data (JSON text).
    group.runAt: for a delayed job, the ms since the epoch when it is due (> 0; a time already
           past makes it due at once, promoted by the next tick); 0 for the other states.
    group.priority: 0 = none, else 1..2097152: a prioritized job needs one, a waiting job has
           none, a delayed or finished job keeps the one it had.
    group.attempts: attempts before it fails for good (>= 1).
    group.attemptsMade: attempts it made (>= 0).
    group.opts: '' or a JSON object of stored options (lua/jobs.lua JOB_OPTS).
    group.value: completed: its return value (JSON text); failed: its failedReason; else ''.
    group.stacktrace: '' or a JSON array of strings (the failures' stacks).
    group.processedOn: ms since the epoch it last started (0 = never).
    group.finishedOn: ms since the epoch it finished (> 0 for a finished job; 0 for the others).
    group.logs: '' or a JSON array of strings, the job's log lines, oldest first.
  Time: a delayed job's wait is its runAt less the server's TIME, read once per call.
  Returns  a flat list: id1, stored1, id2, stored2, ...: stored 1 = written; 0 = a job with that id
           existed and nothing was written for it.
  Errors   ERR_INVALID (an argument, named with its group; an id named twice in one call; a state
           and its fields that do not agree; stacktrace or logs that are not a JSON array of
           strings), ERR_WRONG_TYPE (a key the call writes holds another type). Every job is
           checked, and the type of every key the call writes, before the first write: a refused
           call stores nothing.
]]
do
local RESTORE_HEAD = { 'count', ARG.count }
local RESTORE_STATES = { waiting = true, prioritized = true, delayed = true, completed = true, failed = true }
local RESTORE_JOB = {
  'jobId', kind('a custom job id (1 to ' .. MAX_ID_LEN .. ' bytes, no ":", "{", "}", whitespace or control characters, not a whole number)',
    function(v)
      if string.find(v, '^%-?%d+$') then return nil end
      return ARG.jobId.check(v)
    end),
  'state', kind('waiting, prioritized, delayed, completed or failed', function(v)
    if RESTORE_STATES[v] then return v end
    return nil
  end),
  'name', ARG.jobName,
  'data', ARG.any,
  'runAt', ARG.ms,
  'priority', ARG.int(0, MAX_PRIORITY),
  'attempts', ARG.int(1, MAX_SAFE_INT),
  'attemptsMade', ARG.int(0, MAX_SAFE_INT),
  'opts', JOB_OPTS,
  'value', ARG.any,
  'stacktrace', ARG.any,
  'processedOn', ARG.ms,
  'finishedOn', ARG.ms,
  'logs', ARG.any,
}
local RESTORE_TYPES = { 'completed', 'zset', 'failed', 'zset' }

-- '' or a JSON array of strings, decoded (an empty table for ''), or nil.
local function stringList(text)
  if text == '' then return {} end
  local ok, t = pcall(cjson.decode, text)
  if not ok or type(t) ~= 'table' then return nil end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  if n ~= #t then return nil end
  for _, s in ipairs(t) do
    if type(s) ~= 'string' then return nil end
  end
  return t
end

-- The checks decodeArgs cannot express, and the type of every key the call writes. Reads only.
-- Sets job.lines (the decoded logs) for the write phase.
local function checkRestore(k, jobs)
  local seen = {}
  for i, job in ipairs(jobs) do
    local label = 'glidemq_restore: job ' .. job.jobId .. ' (group ' .. i .. ')'
    if seen[job.jobId] then refuse('ERR_INVALID', label .. ': the id is named twice in one call') end
    seen[job.jobId] = true
    local finished = job.state == 'completed' or job.state == 'failed'
    if (job.state == 'delayed') ~= (job.runAt > 0) then
      refuse('ERR_INVALID', label .. ': runAt must be > 0 for a delayed job and 0 for any other')
    end
    if job.state == 'prioritized' and job.priority == 0 then
      refuse('ERR_INVALID', label .. ': a prioritized job needs a priority of 1..' .. MAX_PRIORITY)
    end
    if job.state == 'waiting' and job.priority > 0 then
      refuse('ERR_INVALID', label .. ': a waiting job has priority 0 (send state prioritized)')
    end
    if finished ~= (job.finishedOn > 0) then
      refuse('ERR_INVALID', label .. ': finishedOn must be > 0 for a finished job and 0 for any other')
    end
    if not finished and (job.value ~= '' or job.stacktrace ~= '') then
      refuse('ERR_INVALID', label .. ': only a finished job carries a value or a stacktrace')
    end
    if not stringList(job.stacktrace) then
      refuse('ERR_INVALID', label .. ': stacktrace must be empty or a JSON array of strings')
    end
    job.lines = stringList(job.logs)
    if not job.lines then refuse('ERR_INVALID', label .. ': logs must be empty or a JSON array of strings') end
  end
  requireTypes(k, INSERT_JOB_WRITES)
  requireTypes(k, RESTORE_TYPES)
  for _, job in ipairs(jobs) do
    local jk = jobKey(k, job.jobId)
    requireKeyType(jk, 'hash')
    if #job.lines > 0 then requireKeyType(jk .. ':logs', 'list') end
  end
end

-- Stores a finished job: its hash with its outcome and times, and its place in its finished set.
local function storeFinished(k, now, job)
  local fields = { 'name', job.name, 'data', job.data, 'ts', now, 'state', job.state,
    'attemptsMade', job.attemptsMade, 'finishedOn', job.finishedOn,
    job.state == 'completed' and 'returnvalue' or 'failedReason', job.value }
  local function put(f, v)
    fields[#fields + 1] = f
    fields[#fields + 1] = v
  end
  if job.priority > 0 then put('priority', job.priority) end
  if job.attempts > 1 then put('attempts', job.attempts) end
  if job.opts ~= '' then put('opts', job.opts) end
  if job.stacktrace ~= '' then put('stacktrace', job.stacktrace) end
  if job.processedOn > 0 then put('processedOn', job.processedOn) end
  redis.call('HSET', jobKey(k, job.jobId), unpack(fields))
  redis.call('ZADD', job.state == 'completed' and k.completed or k.failed, job.finishedOn, job.jobId)
end

-- Stores a job that waits (ready, prioritized or delayed) as an add would, with the attempts it made.
local function storeWaiting(k, now, job)
  local extra = {}
  if job.attemptsMade > 0 then extra = { 'attemptsMade', job.attemptsMade } end
  if job.processedOn > 0 then
    extra[#extra + 1] = 'processedOn'
    extra[#extra + 1] = job.processedOn
  end
  local delay = 0
  if job.state == 'delayed' then delay = math.max(1, job.runAt - now) end
  insertJob(k, now, job.jobId, job.name, job.data, delay, job.priority, false, job.attempts, job.opts, nil, extra)
end

register('glidemq_restore', function(keys, args)
  local k = keysFor(keys[1])
  local _, jobs = decodeArgs('glidemq_restore', args, RESTORE_HEAD, RESTORE_JOB, 'count')
  checkRestore(k, jobs)
  local now = serverNow()
  ensureQueue(k)
  local out = {}
  for _, job in ipairs(jobs) do
    local jk = jobKey(k, job.jobId)
    local stored = 0
    if redis.call('EXISTS', jk) == 0 then
      stored = 1
      if job.state == 'completed' or job.state == 'failed' then
        storeFinished(k, now, job)
      else
        storeWaiting(k, now, job)
      end
      if #job.lines > 0 then redis.call('RPUSH', jk .. ':logs', unpack(job.lines)) end
    end
    out[#out + 1] = job.jobId
    out[#out + 1] = stored
  end
  return out
end)
end
