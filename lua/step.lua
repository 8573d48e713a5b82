--[[ step.lua — glidemq_moveToDelayed: a running job parks itself until later, remembering its step.
  A step job checkpoints by moving its active claim to the scheduled set and writing data.step in
  the same call, so a crash either leaves the old claim (and the old step) or the parked job with
  the new step, never a mix. The promotion loop re-queues it where its options say (stream,
  priority or LIFO), and the processor resumes from job.data.step.
  The run time is given either as an absolute time (a user's wish, job.moveToDelayed(ts): the
  caller's clock picks it) or as a delay the server adds to its own TIME (job.moveToDelayedIn(ms),
  so "run again in N ms" holds whatever the worker's clock says). Everything compared is the
  server's time.
  KEYS[1]  meta key.
  ARGV[1]  jobId: the running job.
  ARGV[2]  fence: the fence of its claim.
  ARGV[3]  consumer: the worker's consumer name.
  ARGV[4]  timing: 'at' (`ms` is an absolute time, ms since the epoch) or 'in' (`ms` is a delay
           from the server's now).
  ARGV[5]  ms: the run time or the delay, per `timing` (a whole number >= 0).
  ARGV[6]  step: the next step as JSON text (stored as data.step), or '' to leave data as it is.
  Returns  'delayed' (parked until its run time) | 'waiting' (the run time is not after the
           server's now: re-queued at once) | 'stale' (the caller no longer owns the claim:
           nothing was changed).
  Writes   the job's `delay` (ms from the server's now to the run time, 0 when re-queued: job.delay
           is live, as BullMQ keeps it) and `parkFence` (the claim's fence: until the job is
           claimed again, that claim may still write its data, progress and logs, lua/progress.lua).
           A run time that becomes the earliest due writes a wake entry (helpers.lua scheduleDue).
  Errors   ERR_JOB_NOT_FOUND (the job was removed), ERR_INVALID (an argument, or the job's data is
           not a JSON object, so it has no place for `step`), ERR_WRONG_TYPE (a key it writes
           holds another type). All checked before the first write.
  data.step is spliced into the stored JSON text rather than decoded and re-encoded: the server's
  cjson turns empty arrays into objects and rounds numbers to 14 digits, which would corrupt data.
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do

-- Index just past the string literal that starts at i (s[i] == '"'), or nil if unterminated.
local function jsonStringEnd(s, i)
  local j = i + 1
  while true do
    local p = string.find(s, '["\\]', j)
    if not p then return nil end
    if string.byte(s, p) == 92 then j = p + 2 else return p + 1 end
  end
end

-- Index just past the JSON value that starts at i, or nil when it is malformed.
local function jsonValueEnd(s, i)
  local c = string.sub(s, i, i)
  if c == '"' then return jsonStringEnd(s, i) end
  if c == '{' or c == '[' then
    local depth, j = 0, i
    while true do
      local p = string.find(s, '[%[%]{}"]', j)
      if not p then return nil end
      local ch = string.sub(s, p, p)
      if ch == '"' then
        j = jsonStringEnd(s, p)
        if not j then return nil end
      else
        depth = depth + ((ch == '{' or ch == '[') and 1 or -1)
        j = p + 1
        if depth == 0 then return j end
      end
    end
  end
  local p = string.find(s, '[,}%]%s]', i)
  if p == i then return nil end
  return p or (#s + 1)
end

local function skipSpace(s, i)
  return string.find(s, '[^ \t\r\n]', i) or (#s + 1)
end

-- Returns the object text with its top-level "step" member set to stepJson, or nil if `s` is not
-- an object. An existing member is replaced in place (the last one, which is the one parsers keep).
local function setStep(s, stepJson)
  local i = skipSpace(s, 1)
  if string.sub(s, i, i) ~= '{' then return nil end
  i = skipSpace(s, i + 1)
  if string.sub(s, i, i) == '}' then
    return string.sub(s, 1, i - 1) .. '"step":' .. stepJson .. string.sub(s, i)
  end
  local lastFrom, lastTo
  while true do
    if string.sub(s, i, i) ~= '"' then return nil end
    local keyEnd = jsonStringEnd(s, i)
    if not keyEnd then return nil end
    local key = string.sub(s, i + 1, keyEnd - 2)
    i = skipSpace(s, keyEnd)
    if string.sub(s, i, i) ~= ':' then return nil end
    i = skipSpace(s, i + 1)
    local valueEnd = jsonValueEnd(s, i)
    if not valueEnd then return nil end
    if key == 'step' then lastFrom, lastTo = i, valueEnd end
    i = skipSpace(s, valueEnd)
    local c = string.sub(s, i, i)
    if c == '}' then break end
    if c ~= ',' then return nil end
    i = skipSpace(s, i + 1)
  end
  if lastFrom then
    return string.sub(s, 1, lastFrom - 1) .. stepJson .. string.sub(s, lastTo)
  end
  return string.sub(s, 1, i - 1) .. ',"step":' .. stepJson .. string.sub(s, i)
end

local STEP_ARGS = { 'jobId', ARG.jobId, 'fence', ARG.fence, 'consumer', ARG.nonEmpty,
  'timing', ARG.oneOf('at', 'in'), 'ms', ARG.ms,
  'step', kind("'' or a JSON value", function(v)
    if v == '' or pcall(cjson.decode, v) then return v end
    return nil
  end) }
local STEP_PARK_TYPES = { 'scheduled', 'zset', 'readyGroups', 'zset', 'events', 'stream', 'wake', 'stream' }

register('glidemq_moveToDelayed', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_moveToDelayed', args, STEP_ARGS)
  local id, step = a.jobId, a.step
  -- check phase: the job, its new data, and the types of the keys the move writes
  local jk = jobKey(k, id)
  local cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'data', 'src', 'grp')
  if not cur[1] then
    refuse('ERR_JOB_NOT_FOUND', 'job ' .. id .. ' does not exist (removed while it ran?): cannot move it to delayed')
  end
  if cur[1] ~= 'active' or tonumber(cur[2]) ~= a.fence or cur[3] ~= a.consumer then return 'stale' end
  local data
  if step ~= '' then
    data = setStep(cur[4] or '{}', step)
    if not data then
      refuse('ERR_INVALID', 'job ' .. id .. ': data is not a JSON object, so moveToDelayed cannot store a step in it ' ..
        '(give the job object data, or call moveToDelayed without a step)')
    end
  end
  local now = serverNow()
  local runAt = a.ms
  if a.timing == 'in' then runAt = now + a.ms end
  requireReleaseTypes(k, cur[5])
  if runAt <= now then
    requireRequeueTypes(k, cur[6] or nil)
  end
  requireTypes(k, STEP_PARK_TYPES)

  releaseActive(k, id, jk)
  -- parkFence: this claim may still write the job's data, progress and logs until its next claim
  -- (BullMQ's step pattern updates the data after moveToDelayed; lua/progress.lua writableJob)
  local fields = { 'parkFence', a.fence, 'delay', math.max(0, runAt - now) }
  if data then
    fields[#fields + 1] = 'data'
    fields[#fields + 1] = data
  end
  if runAt <= now then
    redis.call('HSET', jk, unpack(fields))
    requeue(k, id, jk)
    emit(k, 'waiting', id, 'step', step)
    return 'waiting'
  end
  fields[#fields + 1] = 'state'
  fields[#fields + 1] = 'delayed'
  redis.call('HSET', jk, unpack(fields))
  scheduleDue(k, id, runAt, now)
  groupHoldDelayed(k, id, jk)
  emit(k, 'delayed', id, 'step', step, 'delay', runAt - now)
  return 'delayed'
end)
end
