--[[ jobs.lua — creating jobs (no registered functions here): insertJob, nextJobId.
  Shared by glidemq_add (lua/add.lua) and scheduler firing (lua/schedulers.lua).
  `now` is always the server's time (serverNow() of the calling function): it becomes the job's ts
  and, with its delay, its due time in the scheduled set.
]]

local MAX_JOB_NAME_LEN = 1024 -- bytes of a job name (src/engine/options.ts MAX_JOB_NAME_BYTES agrees)

-- The queue keys insertJob and nextJobId may write, as requireTypes takes them: a caller checks
-- them (or the ones its jobs need) before its first write. A group job also writes its group's
-- keys (lua/group.lua), which the caller checks too.
local INSERT_JOB_WRITES = { 'meta', 'hash', 'id', 'string', 'events', 'stream', 'stream', 'stream', 'wake', 'stream',
  'scheduled', 'zset', 'prioritized', 'zset', 'lifo', 'list' }

-- Writes a new job's hash and puts it where it waits (scheduled set, its group, or ready; a delayed
-- job of an ordered group also holds its place in the group's line). Shared
-- with scheduler firing (lua/schedulers.lua). `group` is a spec checked by groupParse, or nil.
-- The hash is written with one HSET (ready jobs: together with their state and stream entry id).
local function insertJob(k, now, id, name, data, delay, priority, lifo, attempts, opts, group)
  local jk = jobKey(k, id)
  local fields = { 'name', name, 'data', data, 'ts', now }
  local function put(f, v)
    fields[#fields + 1] = f
    fields[#fields + 1] = v
  end
  if priority > 0 then put('priority', priority) end
  if lifo then put('lifo', '1') end
  if attempts > 1 then put('attempts', attempts) end
  if opts ~= '' then put('opts', opts) end
  if group then
    groupConfigure(k, group, now)
    put('grp', group.id)
  end
  if delay > 0 then
    put('delay', delay)
    put('state', 'delayed')
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
  -- a delayed job's event says so itself: a reader that looks the job up later may find it gone
  if delay > 0 then emit(k, 'added', id, 'delay', delay) else emit(k, 'added', id) end
end

-- The next free id from the counter, skipping values a job already holds (custom ids are refused
-- when they are whole numbers, but a queue written by an older version may hold some).
local function nextJobId(k)
  local id
  repeat id = tostring(redis.call('INCR', k.id)) until redis.call('EXISTS', jobKey(k, id)) == 0
  return id
end

