--[[ activate.lua — shared locals: turning a delivered or popped job into an active claim.
  A claim is fenced: every activation increments the job's `fence` field, and complete/fail/
  progress/heartbeat take effect only with the fence and consumer of the current claim.
  Priority, LIFO and group jobs are popped and activated in the same function call, so no crash
  can fall between the pop and the claim (there is no window in which a popped job is unowned).
]]

-- The values of up to three fields in an HGETALL reply, in one pass.
local function pick(fields, a, b, c)
  local va, vb, vc
  for i = 1, #fields, 2 do
    local f = fields[i]
    if f == a then va = fields[i + 1] elseif f == b then vb = fields[i + 1] elseif f == c then vc = fields[i + 1] end
  end
  return va, vb, vc
end

-- Hash fields a worker has no use for (delivery bookkeeping), or that a claim sets anew.
local CLAIM_REPLY_SKIPS = { sid = true, owner = true, src = true, lockedAt = true, state = true, fence = true, processedOn = true }
-- Fields every job has (opts: most), sent by position in a claim reply rather than by name.
local CLAIM_REPLY_SLOTS = { name = 3, data = 4, ts = 5, opts = 6 }

-- Claims a job for `consumer` given its HGETALL reply (read by the caller, which checked it) and
-- returns the claim reply (src/engine/job.ts, decodeClaim): id, fence, name, data, ts, opts
-- (false: none) by position, then the job's other stored fields as name/value pairs, without the
-- bookkeeping ones. The hash is read once and written once, and the reply carries no string the
-- worker already knows: every string in it costs the server and the client. The state is
-- 'active' and processedOn is the `now` the worker sent.
local function claimJob(k, id, jk, fields, consumer, now, src)
  local out = { id, '', false, false, false, false }
  local fence = 0
  for i = 1, #fields, 2 do
    local f = fields[i]
    local slot = CLAIM_REPLY_SLOTS[f]
    if slot then
      out[slot] = fields[i + 1]
    elseif not CLAIM_REPLY_SKIPS[f] then
      out[#out + 1] = f
      out[#out + 1] = fields[i + 1]
    elseif f == 'fence' then
      fence = tonumber(fields[i + 1]) or 0
    end
  end
  fence = tostring(fence + 1)
  out[2] = fence
  redis.call('HSET', jk, 'fence', fence, 'state', 'active', 'processedOn', now, 'owner', consumer, 'src', src, 'lockedAt', now)
  if src ~= 's' then listClaim(k, id) end
  return out
end

-- Marks the job active for `consumer` and returns its fields for the worker.
local function activateJob(k, id, consumer, now, src, sid)
  local jk = jobKey(k, id)
  if src == 's' then redis.call('HSET', jk, 'sid', sid) end
  return claimJob(k, id, jk, redis.call('HGETALL', jk), consumer, now, src)
end

-- A job hash another program replaced by another type (a string, a list...): reading it must not
-- fail the whole call, or that one key would stop every worker of the queue. Returns the fields,
-- or nil for such a key (which is then skipped and left as it is).
local function readJob(k, id, jk)
  local fields = redis.pcall('HGETALL', jk)
  if fields.err then
    emit(k, 'skipped', id, 'reason', 'the job key holds another type than a hash (written by another program)')
    return nil
  end
  return fields
end

-- Pops one priority job, else one LIFO job, else one group job, and activates it. Returns fields or nil.
local function popListJob(k, consumer, now)
  while true do
    local id, src
    local top = redis.call('ZPOPMIN', k.prioritized)
    if top[1] then
      id, src = top[1], 'p'
    else
      id = redis.call('LPOP', k.lifo)
      if not id then
        id = takeGroupJob(k, consumer, now)
        if not id then return nil end
        return activateJob(k, id, consumer, now, 'g', nil)
      end
      src = 'l'
    end
    -- A job removed while it waited leaves only its id behind; skip such leftovers.
    local jk = jobKey(k, id)
    local fields = readJob(k, id, jk)
    if fields and fields[1] then return claimJob(k, id, jk, fields, consumer, now, src) end
  end
end

-- Activates one stream entry delivered to `consumer`; returns fields, or nil for a leftover entry.
local function activateEntry(k, sid, id, consumer, now)
  local jk = jobKey(k, id)
  local fields = readJob(k, id, jk) or {}
  local state, esid, owner = pick(fields, 'state', 'sid', 'owner')
  if state == 'active' and esid == sid then
    -- The entry is the pending entry of a live claim: never drop it (stalled recovery needs it).
    -- Claimed by this same consumer means a call repeated after its reply was lost on the way
    -- (a client resends unanswered commands on reconnect): hand the claim to the worker again.
    if owner == consumer then return claimJob(k, id, jk, fields, consumer, now, 's') end
    return nil
  end
  if state ~= 'waiting' or esid ~= sid then
    -- removed job, or an entry superseded by a redispatch: never re-create or double-run it
    redis.call('XACK', k.stream, GROUP, sid)
    redis.call('XDEL', k.stream, sid)
    return nil
  end
  return claimJob(k, id, jk, fields, consumer, now, 's')
end

-- Gives a delivered but not activated entry back to the queue (paused, or no global slot).
local function handBack(k, sid, id)
  local jk = jobKey(k, id)
  local st = redis.pcall('HMGET', jk, 'state', 'sid')
  if st.err then st = {} end
  -- the pending entry of a live claim (a repeated call) stays for stalled recovery
  if st[1] == 'active' and st[2] == sid then return end
  redis.call('XACK', k.stream, GROUP, sid)
  redis.call('XDEL', k.stream, sid)
  if st[1] == 'waiting' then
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
-- global limit. `m` (optional): the meta fields {paused, globalConcurrency} if the caller read
-- them in this call. Returns a list of field arrays.
local function fetchNext(k, consumer, now, count, m)
  local out = {}
  if count <= 0 then return out end
  m = m or redis.call('HMGET', k.meta, 'paused', 'globalConcurrency')
  if m[1] == '1' then return out end
  local limit = toInt(m[2], 0)
  if limit > 0 then
    local free = limit - activeCount(k)
    if free < count then count = math.max(free, 0) end
  end
  -- one EXISTS answers for the lists and the groups in the common case where none holds a job
  if count > 0 and redis.call('EXISTS', k.prioritized, k.lifo, k.readyGroups, k.timedGroups) > 0 then
    while #out < count do
      local job = popListJob(k, consumer, now)
      if not job then break end
      out[#out + 1] = job
    end
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
