--[[ activate.lua — shared locals: turning a delivered or popped job into an active claim.
  A claim is fenced: every activation increments the job's `fence` field, and complete/fail/
  progress/heartbeat take effect only with the fence and consumer of the current claim.
  Priority and LIFO jobs are popped and activated in the same function call, so no crash can
  fall between the pop and the claim (there is no window in which a popped job is unowned).
]]

-- Marks the job active for `consumer` and returns its fields (HGETALL) for the worker.
local function activateJob(k, id, consumer, now, src, sid)
  local jk = jobKey(k, id)
  local fence = redis.call('HINCRBY', jk, 'fence', 1)
  redis.call('HSET', jk, 'state', 'active', 'processedOn', now, 'owner', consumer, 'src', src, 'lockedAt', now)
  if src == 's' then
    redis.call('HSET', jk, 'sid', sid)
  else
    listClaim(k, id)
  end
  local fields = redis.call('HGETALL', jk)
  fields[#fields + 1] = 'id'
  fields[#fields + 1] = id
  return fields
end

-- Pops one priority job, else one LIFO job, and activates it. Returns fields or nil.
local function popListJob(k, consumer, now)
  while true do
    local id, src
    local top = redis.call('ZPOPMIN', k.prioritized)
    if top[1] then
      id, src = top[1], 'p'
    else
      id = redis.call('LPOP', k.lifo)
      if not id then return nil end
      src = 'l'
    end
    -- A job removed while it waited leaves only its id behind; skip such leftovers.
    if redis.call('EXISTS', jobKey(k, id)) == 1 then
      return activateJob(k, id, consumer, now, src, nil)
    end
  end
end

-- Activates one stream entry delivered to `consumer`; returns fields, or nil for a leftover entry.
local function activateEntry(k, sid, id, consumer, now)
  local jk = jobKey(k, id)
  local st = redis.call('HMGET', jk, 'state', 'sid')
  if st[1] ~= 'waiting' or st[2] ~= sid then
    -- removed job, or an entry superseded by a redispatch: never re-create or double-run it
    redis.call('XACK', k.stream, GROUP, sid)
    redis.call('XDEL', k.stream, sid)
    return nil
  end
  return activateJob(k, id, consumer, now, 's', sid)
end

-- Gives a delivered but not activated entry back to the queue (paused, or no global slot).
local function handBack(k, sid, id)
  redis.call('XACK', k.stream, GROUP, sid)
  redis.call('XDEL', k.stream, sid)
  local jk = jobKey(k, id)
  if redis.call('HGET', jk, 'state') == 'waiting' then
    local nsid = redis.call('XADD', k.stream, '*', 'id', id)
    redis.call('HSET', jk, 'sid', nsid)
  end
end

-- Free slots under globalConcurrency (a large number when there is no limit).
local function freeSlots(k)
  local limit = globalLimit(k)
  if limit <= 0 then return 1000000 end
  local free = limit - activeCount(k)
  if free < 0 then return 0 end
  return free
end

-- Fetches up to `count` jobs: priority first, then LIFO, then the stream. Obeys pause and the
-- global limit. Returns a list of field arrays.
local function fetchNext(k, consumer, now, count)
  local out = {}
  if count <= 0 or isPaused(k) then return out end
  local free = freeSlots(k)
  if free < count then count = free end
  while #out < count do
    local job = popListJob(k, consumer, now)
    if not job then break end
    out[#out + 1] = job
  end
  local guard = 0
  while #out < count and guard < 4 do
    guard = guard + 1
    local want = count - #out
    local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', want, 'STREAMS', k.stream, '>')
    if not r or not r[1] then break end
    local entries = r[1][2]
    if #entries == 0 then break end
    for _, e in ipairs(entries) do
      local sid, f = e[1], e[2]
      local id = f and f[2]
      if id then
        local job = activateEntry(k, sid, id, consumer, now)
        if job then out[#out + 1] = job end
      else
        redis.call('XACK', k.stream, GROUP, sid)
        redis.call('XDEL', k.stream, sid)
      end
    end
  end
  return out
end
