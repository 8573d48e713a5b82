--[[ restore.lua — storing jobs brought from elsewhere (glidemq import-bullmq), each in the state it
  had there, with its fields, once.

  glidemq_restore — stores jobs under the ids given, each in its state: a waiting, prioritized or
  delayed job is added as glidemq_add adds one (its hash, its place, the 'added' event); a completed
  or failed job is stored finished (its hash with its outcome, attempts and times, and its place in
  the finished set, scored by its finishedOn), without events, metrics or retention. A job's logs
  are appended to its logs list. A job whose id exists already is not written again: a second run
  of the same import stores nothing twice.
  KEYS[1]  meta key of the queue.
  ARGV[1]  count: how many jobs follow (0..10000), each a group of 18 arguments:
    group.jobId: the id (as a custom id of glidemq_add: 1..256 bytes, no ':', '{', '}',
           whitespace or control characters, not a whole number).
    group.state: waiting | prioritized | delayed | completed | failed | waiting-children.
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
    group.flow: '' or a JSON object, the job's place in a flow (lua/flow-keys.lua):
           parents: job keys of its parents (a child's `parents` field; its finish settles them);
           deps: job keys of its children not settled yet (a waiting-children job only);
           processed: {child job key: its return value as JSON text} (children that completed);
           ignored: {child job key: its failed reason} (children that failed, ignored);
           delay: ms a waiting-children job waits once its children settled (its own delay).
           A dep that exists in a queue the call reaches (this one; any on a standalone server)
           and completed is stored processed, not as a dep: it finished before its parent came. A
           waiting-children job left with no dep is queued as its last child's settle queues one.
    group.dedupId: '' or the dedup id the job holds (1..512 bytes), recorded as glidemq_add records
           one (lua/dedup.lua) unless an entry for it stands already.
    group.dedupMode: '' (no dedup id) | simple | throttle | extend | debounce.
    group.dedupTtl: ms the dedup window has left (0 = no end; throttle and extend need > 0).
  Time: a delayed job's wait is its runAt less the server's TIME, read once per call; a dedup
  window ends dedupTtl after it.
  Returns  a flat list: id1, stored1, id2, stored2, ...: stored 1 = written; 0 = a job with that id
           existed and nothing was written for it; 2 = written, but its dedup id was not recorded
           (an entry for it stands, pointing at another job).
  Errors   ERR_INVALID (an argument, named with its group; an id named twice in one call; a state
           and its fields that do not agree; stacktrace or logs that are not a JSON array of
           strings; a flow that is not as above; dedup fields as glidemq_add refuses them), ERR_WRONG_TYPE (a key the call writes holds another type). Every job is
           checked, and the type of every key the call writes, before the first write: a refused
           call stores nothing.
]]
do
local RESTORE_HEAD = { 'count', ARG.count }
local RESTORE_STATES = { waiting = true, prioritized = true, delayed = true, completed = true, failed = true,
  ['waiting-children'] = true }
local RESTORE_JOB = {
  'jobId', kind('a custom job id (1 to ' .. MAX_ID_LEN .. ' bytes, no ":", "{", "}", whitespace or control characters, not a whole number)',
    function(v)
      if string.find(v, '^%-?%d+$') then return nil end
      return ARG.jobId.check(v)
    end),
  'state', kind('waiting, prioritized, delayed, completed, failed or waiting-children', function(v)
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
  'flow', ARG.orEmpty(ARG.jsonObject),
  'dedupId', kind("'' or a dedup id of 1 to " .. DEDUP_MAX_ID_LEN .. ' bytes', function(v)
    if #v <= DEDUP_MAX_ID_LEN then return v end
    return nil
  end),
  'dedupMode', ARG.oneOf('', 'simple', 'throttle', 'extend', 'debounce'),
  'dedupTtl', ARG.int(0, DEDUP_MAX_TTL),
}
local RESTORE_TYPES = { 'completed', 'zset', 'failed', 'zset' }
local RESTORE_PARENT_TYPES = { 'waitingChildren', 'zset', 'events', 'stream' }
local RESTORE_DEDUP_TYPES = { 'dedup', 'hash' }

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

-- A list of job keys (flow.parents, flow.deps), checked; {} for none.
local function jobKeyList(list, label, name)
  if list == nil then return {} end
  local n = 0
  if type(list) == 'table' then
    for _ in pairs(list) do n = n + 1 end
  end
  if type(list) ~= 'table' or n ~= #list then refuse('ERR_INVALID', label .. ': flow.' .. name .. ' must be a JSON array of job keys') end
  for _, key in ipairs(list) do
    if type(key) ~= 'string' then refuse('ERR_INVALID', label .. ': flow.' .. name .. ' must be a JSON array of job keys') end
    FLOW.requireJobKey(key, label .. ': flow.' .. name .. ' entry')
  end
  return list
end

-- A map of child job key -> text (flow.processed, flow.ignored), checked; {} for none.
local function childResults(map, label, name)
  if map == nil then return {} end
  if type(map) ~= 'table' then refuse('ERR_INVALID', label .. ': flow.' .. name .. ' must be a JSON object of job key -> string') end
  for key, v in pairs(map) do
    if type(key) ~= 'string' or type(v) ~= 'string' then
      refuse('ERR_INVALID', label .. ': flow.' .. name .. ' must be a JSON object of job key -> string')
    end
    FLOW.requireJobKey(key, label .. ': flow.' .. name .. ' key')
  end
  return map
end

-- The job's flow (group.flow) decoded and checked: parents, deps, processed, ignored, delay.
local function flowOf(job, label)
  local f = { parents = {}, deps = {}, processed = {}, ignored = {}, delay = 0 }
  if job.flow == '' then return f end
  local t = cjson.decode(job.flow) -- (ARG.jsonObject checked that it decodes to an object)
  f.parents = jobKeyList(t.parents, label, 'parents')
  f.deps = jobKeyList(t.deps, label, 'deps')
  f.processed = childResults(t.processed, label, 'processed')
  f.ignored = childResults(t.ignored, label, 'ignored')
  if t.delay ~= nil then
    if type(t.delay) ~= 'number' or t.delay < 0 or t.delay > MAX_SAFE_INT or t.delay % 1 ~= 0 then
      refuse('ERR_INVALID', label .. ': flow.delay must be a whole number of ms >= 0')
    end
    f.delay = t.delay
  end
  if #f.deps > 0 and job.state ~= 'waiting-children' then
    refuse('ERR_INVALID', label .. ': only a waiting-children job has flow.deps')
  end
  if f.delay > 0 and job.state ~= 'waiting-children' then
    refuse('ERR_INVALID', label .. ': only a waiting-children job has flow.delay (send state delayed and runAt)')
  end
  return f
end

-- A waiting-children job's deps that finished before it came (reads only): a dep the call can reach
-- that completed moves to processed. Sets f.pending, the deps left.
local function settledDeps(k, f)
  f.pending = {}
  for _, dep in ipairs(f.deps) do
    local base = FLOW.splitJobKey(dep)
    local state, value = nil, nil
    if base == k.base or FLOW.reachesEveryQueue() then
      requireKeyType(dep, 'hash')
      local cur = redis.call('HMGET', dep, 'state', 'returnvalue')
      state, value = cur[1], cur[2]
    end
    if state == 'completed' then
      f.processed[dep] = value or 'null'
    else
      f.pending[#f.pending + 1] = dep
    end
  end
end

-- The flow and dedup checks of one job (reads only): its keys' types, and its deps that finished.
local function checkFlowAndDedup(k, job, jk, label)
  local f = flowOf(job, label)
  job.f = f
  local parent = job.state == 'waiting-children'
  if parent then
    settledDeps(k, f)
    requireTypes(k, RESTORE_PARENT_TYPES)
    requireKeyType(FLOW.depsOf(jk), 'set')
    -- (a parent none of whose deps is left is queued at once, as the settle of its last child would)
    if #f.pending == 0 then FLOW.checkParent(k, job.jobId, 'completed', 0) end
  end
  if next(f.processed) then requireKeyType(FLOW.processedOf(jk), 'hash') end
  if next(f.ignored) then requireKeyType(FLOW.ignoredOf(jk), 'hash') end
  if job.dedupId ~= '' or job.dedupMode ~= '' or job.dedupTtl ~= 0 then
    checkDedup(label, job.dedupId, job.dedupTtl, job.dedupMode, job.state == 'delayed' and 1 or 0)
    requireTypes(k, RESTORE_DEDUP_TYPES)
  end
end

-- The checks decodeArgs cannot express, and the type of every key the call writes. Reads only.
-- Sets job.lines (the decoded logs) and job.f (its flow) for the write phase.
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
    if job.state == 'waiting-children' and job.value .. job.stacktrace ~= '' then
      refuse('ERR_INVALID', label .. ': only a finished job carries a value or a stacktrace')
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
  for i, job in ipairs(jobs) do
    local jk = jobKey(k, job.jobId)
    requireKeyType(jk, 'hash')
    if #job.lines > 0 then requireKeyType(jk .. ':logs', 'list') end
    checkFlowAndDedup(k, job, jk, 'glidemq_restore: job ' .. job.jobId .. ' (group ' .. i .. ')')
  end
end

-- The hash fields every stored job of a restore has (name, data, ts and what its options set),
-- appended to `fields` (the fields of its state).
local function restoredFields(job, fields, now)
  local n = #fields
  for _, v in ipairs({ 'name', job.name, 'data', job.data, 'ts', now }) do
    n = n + 1
    fields[n] = v
  end
  if job.priority > 0 then fields[n + 1], fields[n + 2], n = 'priority', job.priority, n + 2 end
  if job.attempts > 1 then fields[n + 1], fields[n + 2], n = 'attempts', job.attempts, n + 2 end
  if job.opts ~= '' then fields[n + 1], fields[n + 2] = 'opts', job.opts end
  return fields
end

-- Stores a finished job: its hash with its outcome and times, and its place in its finished set.
local function storeFinished(k, now, job)
  local fields = restoredFields(job, { 'state', job.state, 'attemptsMade', job.attemptsMade, 'finishedOn', job.finishedOn,
    job.state == 'completed' and 'returnvalue' or 'failedReason', job.value }, now)
  local function put(f, v)
    fields[#fields + 1] = f
    fields[#fields + 1] = v
  end
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

-- Stores a parent waiting for its children, as glidemq_addFlow stores one (lua/flow.lua), with the
-- attempts it made; queued at once when none of its deps is left.
local function storeParent(k, now, job)
  local f = job.f
  local jk = jobKey(k, job.jobId)
  local fields = restoredFields(job, { 'state', 'waiting-children' }, now)
  local function put(fld, v)
    fields[#fields + 1] = fld
    fields[#fields + 1] = v
  end
  if f.delay > 0 then put('delay', f.delay) end
  if job.attemptsMade > 0 then put('attemptsMade', job.attemptsMade) end
  if job.processedOn > 0 then put('processedOn', job.processedOn) end
  redis.call('HSET', jk, unpack(fields))
  if #f.pending > 0 then redis.call('SADD', FLOW.depsOf(jk), unpack(f.pending)) end
  redis.call('ZADD', k.waitingChildren, now, job.jobId)
  emit(k, 'added', job.jobId, 'waitingChildren', '1')
  emit(k, 'waiting-children', job.jobId)
end

-- Writes a stored job's flow: its parents and its children's results (flow marks 'c' and 'p'),
-- and queues a parent none of whose deps is left.
local function storeFlowLinks(k, now, job)
  local f = job.f
  local jk = jobKey(k, job.jobId)
  local results = false
  for _, map in ipairs({ { f.processed, FLOW.processedOf(jk) }, { f.ignored, FLOW.ignoredOf(jk) } }) do
    local pairsList = {}
    for key, v in pairs(map[1]) do
      pairsList[#pairsList + 1] = key
      pairsList[#pairsList + 1] = v
    end
    if #pairsList > 0 then
      redis.call('HSET', map[2], unpack(pairsList))
      results = true
    end
  end
  if #f.parents > 0 then
    redis.call('HSET', jk, 'parents', table.concat(f.parents, ' '))
    FLOW.mark(jk, 'c')
  end
  if results or job.state == 'waiting-children' then FLOW.mark(jk, 'p') end
  if job.state == 'waiting-children' and #f.pending == 0 then
    redis.call('ZREM', k.waitingChildren, job.jobId)
    FLOW.releaseParent(k, job.jobId, jk, now)
  end
end

-- Records the job's dedup id as an add would (unless an entry for it stands); false when one stands.
local function storeDedup(k, now, job)
  if job.dedupId == '' then return true end
  local v = redis.call('HGET', k.dedup, job.dedupId)
  if v and not dedupEntryOver(k, v, now) then
    local _, _, pointsAt = parseDedupEntry(v)
    return pointsAt == job.jobId
  end
  local delay = job.state == 'delayed' and math.max(1, job.runAt - now) or 0
  recordDedup(k, now, job.dedupId, job.dedupTtl, job.dedupMode, delay, job.jobId)
  return true
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
      elseif job.state == 'waiting-children' then
        storeParent(k, now, job)
      else
        storeWaiting(k, now, job)
      end
      if #job.lines > 0 then redis.call('RPUSH', jk .. ':logs', unpack(job.lines)) end
      storeFlowLinks(k, now, job)
      if not storeDedup(k, now, job) then stored = 2 end
    end
    out[#out + 1] = job.jobId
    out[#out + 1] = stored
  end
  return out
end)
end
