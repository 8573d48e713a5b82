--[[ jobs.lua — creating jobs (no registered functions here): insertJob, nextJobId, guardIdCounter,
  JOB_OPTS (the argument kind of the options a job stores).
  Shared by glidemq_add (lua/add.lua) and scheduler firing (lua/schedulers.lua).
  `now` is always the server's time (serverNow() of the calling function): it becomes the job's ts
  and, with its delay, its due time in the scheduled set.
]]

local MAX_JOB_NAME_LEN = 1024 -- bytes of a job name (src/engine/producing/options.ts MAX_JOB_NAME_BYTES agrees)
-- The argument kind of a job's name (glidemq_add, glidemq_addData, glidemq_addFlow).
ARG.jobName = kind('a non-empty string of at most ' .. MAX_JOB_NAME_LEN .. ' bytes', function(v)
  if v ~= '' and #v <= MAX_JOB_NAME_LEN then return v end
  return nil
end)

-- The queue keys insertJob and nextJobId may write, as requireTypes takes them: a caller checks
-- them (or the ones its jobs need) before its first write. A group job also writes its group's
-- keys (lua/group.lua), which the caller checks too.
local INSERT_JOB_WRITES = { 'meta', 'hash', 'id', 'string', 'events', 'stream', 'stream', 'stream', 'wake', 'stream',
  'scheduled', 'zset', 'prioritized', 'zset', 'lifo', 'list' }

-- Writes a new job's hash and puts it where it waits (scheduled set, its group, or ready; a delayed
-- job of an ordered group also holds its place in the group's line). Shared
-- with scheduler firing (lua/schedulers.lua). `group` is a spec checked by groupParse, or nil.
-- The hash is written with one HSET (ready jobs: together with their state and stream entry id);
-- `extra` (optional) is a list of more field, value pairs for it (a flow child's parents).
-- `quiet` (optional): no 'added' event (a flow's node while no QueueEvents listens, lua/flow.lua).
local function insertJob(k, now, id, name, data, delay, priority, lifo, attempts, opts, group, extra, quiet)
  local jk = k.jobPrefix .. id
  -- (fields appended at a counted position: no closure per job, no length operator per field.
  -- The nils size the list for 14 entries, the usual most: a list filled past its size is
  -- rehashed, once at its 7th entry and again at its 9th; set in order from 1, it has no gap, so
  -- unpack reads exactly the fields set.)
  local fields = { 'name', name, 'data', data, 'ts', now, nil, nil, nil, nil, nil, nil, nil, nil }
  local n = 6
  if extra then
    for i = 1, #extra do fields[n + i] = extra[i] end
    n = n + #extra
  end
  if priority > 0 then fields[n + 1], fields[n + 2], n = 'priority', priority, n + 2 end
  if lifo then fields[n + 1], fields[n + 2], n = 'lifo', '1', n + 2 end
  if attempts > 1 then fields[n + 1], fields[n + 2], n = 'attempts', attempts, n + 2 end
  if opts ~= '' then fields[n + 1], fields[n + 2], n = 'opts', opts, n + 2 end
  if group then
    groupConfigure(k, group, now)
    fields[n + 1], fields[n + 2], n = 'grp', group.id, n + 2
  end
  if delay > 0 then
    fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = 'delay', delay, 'state', 'delayed'
    redis.call('HSET', jk, unpack(fields))
    scheduleDue(k, id, now + delay, now)
    -- in an ordered group it takes its place in the line now (lua/group.lua groupHoldPlace)
    if group then groupHoldPlace(k, id, jk, group.id) end
  elseif group then
    redis.call('HSET', jk, unpack(fields))
    groupEnqueue(k, id, jk, group.id)
  else
    enqueueReady(k, id, jk, priority, lifo, fields)
  end
  if quiet then return end
  -- a delayed job's event says so itself: a reader that looks the job up later may find it gone
  if delay > 0 then emit(k, 'added', id, 'delay', delay) else emit(k, 'added', id) end
end

--[[ JOB_OPTS: the argument kind of a job's stored options ('' or a JSON object: the `opts` of
  glidemq_add, glidemq_addData and a scheduler's job; src/engine/producing/options.ts StoredOptions). Every
  option a later call reads from them is checked here as options.ts encodeJob checks it, within
  the range that call takes (finish's KEEP_RULE, glidemq_addLog's keep, the retry delay: whole
  numbers up to 2^53 - 1), so a job an add stores is never refused at finish, retry or retention.
  Other fields are the client's own and pass unread. A refusal names the option. ]]
local JOB_OPTS
do
local MAX_RETENTION_AGE_S = 9007199254740 -- seconds whose ms fit 2^53 - 1 (a literal: no math at load)
local MAX_TIMEOUT_MS = 2147483647 -- a Node timer's longest delay (options.ts MAX_TIMEOUT_MS agrees)
local why = '' -- the last refusal's reason, for the expectation (built on refusal)
-- option texts that passed the check (the check depends on the text alone), and how many
local goodOpts, goodOptsCount = {}, 0

local function wholeIn(v, min)
  return type(v) == 'number' and v >= min and v <= MAX_SAFE_INT and v % 1 == 0
end

local function numberIn(v, min, max)
  return type(v) == 'number' and v >= min and v <= max
end

-- Why retention rule `v` of option `name` cannot be used, or nil (absent, a boolean, a count or
-- {count?, age?, limit?}).
local function retentionProblem(name, v)
  if v == nil or v == cjson.null or type(v) == 'boolean' or wholeIn(v, 0) then return nil end
  if type(v) ~= 'table' then return name .. ' must be true, false, a whole number from 0 to 2^53 - 1 or {count?, age?}' end
  if v.count ~= nil and not wholeIn(v.count, 0) then return name .. '.count must be a whole number from 0 to 2^53 - 1' end
  if v.age ~= nil and not numberIn(v.age, 0, MAX_RETENTION_AGE_S) then
    return name .. '.age must be a number of seconds from 0 to ' .. MAX_RETENTION_AGE_S
  end
  if v.limit ~= nil and not wholeIn(v.limit, 0) then return name .. '.limit must be a whole number from 0 to 2^53 - 1' end
  return nil
end

local function backoffProblem(b)
  if b == nil then return nil end
  if type(b) ~= 'table' or type(b.type) ~= 'string' or b.type == '' then return 'backoff must be {type, delay?, jitter?}' end
  if b.delay ~= nil and not numberIn(b.delay, 0, MAX_SAFE_INT) then return 'backoff.delay must be a number of ms from 0 to 2^53 - 1' end
  if b.jitter ~= nil and not numberIn(b.jitter, 0, 1) then return 'backoff.jitter must be a number from 0 to 1' end
  return nil
end

local function jobOptsProblem(o)
  local problem = retentionProblem('removeOnComplete', o.removeOnComplete) or retentionProblem('removeOnFail', o.removeOnFail)
    or backoffProblem(o.backoff)
  if problem then return problem end
  if o.keepLogs ~= nil and not wholeIn(o.keepLogs, 0) then return 'keepLogs must be a whole number from 0 to 2^53 - 1' end
  if o.timestamp ~= nil and not numberIn(o.timestamp, 0, MAX_SAFE_INT) then
    return 'timestamp must be a time in ms from 0 to 2^53 - 1'
  end
  -- read by the worker that runs the job (a timer's longest delay: src/engine/consuming/run-timer.ts)
  if o.timeout ~= nil and not (wholeIn(o.timeout, 1) and o.timeout <= MAX_TIMEOUT_MS) then
    return 'timeout must be a whole number of ms from 1 to ' .. MAX_TIMEOUT_MS
  end
  return nil
end

JOB_OPTS = kind(function()
  return "'' or a JSON object of job options (" .. why .. ')'
end, function(v)
  if v == '' or goodOpts[v] then return v end
  local ok, o = pcall(cjson.decode, v)
  if not ok or type(o) ~= 'table' or not string.find(v, '^%s*{') then -- (an array decodes to a table too)
    why = 'not a JSON object'
    return nil
  end
  local problem = jobOptsProblem(o)
  if problem then
    why = problem
    return nil
  end
  -- the check depends on the text alone: a flow's or a bulk's jobs, which mostly share one, are
  -- decoded once (the library's Lua state outlives a call; the table is dropped when it grows)
  if goodOptsCount >= 64 then goodOpts, goodOptsCount = {}, 0 end
  goodOpts[v], goodOptsCount = true, goodOptsCount + 1
  return v
end)
end

-- How far the id counter moves on a new server epoch (guardIdCounter). It must exceed the ids a
-- crash can take back: those handed out after the last write that reached the disk (or the
-- replica that is promoted). The fastest path (glidemq_addData) hands out well under 1,000 ids per
-- ms of server time, so 10^8 covers 100 s of adds at full speed: everysec's loss window (1 to 2 s,
-- longer only while the disk stalls), `appendfsync no`'s (the kernel writes back within ~30 s) and
-- replication lag. RDB-only can lose more than that (README, "Job ids after a crash"). Ids stay
-- below 10^14 (Lua writes them exactly up to 14 digits), so a queue has room for 10^6 epochs.
local guardIdCounter
do
local ID_EPOCH_GAP = 100000000

-- Called by every call that takes ids from the counter, before its first (in its write phase:
-- it writes meta and the counter, whose types the caller checked). On a new epoch of the server
-- (a new process, or a promotion: lua/epoch.lua replicationEpoch) the counter moves ID_EPOCH_GAP
-- on, so no id a crash or failover took back is handed out again; the epoch is kept in meta
-- (idEpoch), so this happens once per epoch per queue. A queue with no counter yet starts at 1.
-- Nothing moves for a user whose ACL refuses INFO (README, "ACL roles", gives +info|replication).
guardIdCounter = function(k)
  local epoch = replicationEpoch()
  if not epoch or redis.call('HGET', k.meta, 'idEpoch') == epoch then return end
  if redis.call('EXISTS', k.id) == 1 then redis.call('INCRBY', k.id, ID_EPOCH_GAP) end
  redis.call('HSET', k.meta, 'idEpoch', epoch)
end
end

-- The next free id from the counter, skipping values a job already holds (custom ids are refused
-- when they are whole numbers, but a queue written by an older version may hold some).
local function nextJobId(k)
  local id
  repeat id = tostring(redis.call('INCR', k.id)) until redis.call('EXISTS', jobKey(k, id)) == 0
  return id
end

