--[[ dedup.lua — shared locals for deduplication (used by glidemq_add and glidemq_upkeep).
  The `<base>:dedup` hash maps a dedup id to `<mode>:<expiresAt>:<jobId>`: the mode letter of the
  add that wrote it (s simple, t throttle, e extend, d debounce), when its window ends (ms of the server's
  clock; 0 = no end) and the job it points at. Valkey 8 has no per-field TTL, so these functions
  keep it: an entry that is over is ignored and overwritten when an add meets it, and the promotion
  tick's bounded sweep (dedupSweep) deletes the ones nobody meets again. Windows are opened and
  compared with the server's TIME only (callers pass serverNow()): a producer whose clock is off
  can neither shorten nor stretch a window.
  An entry stands (blocks or absorbs adds) as the add that wrote it asked, whatever mode a later
  add asks (dedupEntryOver): a simple entry while its job is not finished (and, with a ttl, its
  window is open); a throttle or extend entry while its window is open; a debounce entry while its
  window is open and its job can still be replaced. What an add that meets a standing entry does
  is its own mode's:
    simple    blocked while the earlier job is not finished (and, with a ttl, its window is open).
    throttle  blocked while the window (ttl from the first add) is open, whatever the job does.
    extend    as throttle, and each add it blocks restarts the window (ttl from that add):
              BullMQ's deduplication {ttl, extend}.
    debounce  while the window is open and the earlier job is still waiting out its first delay
              (delayed and never run: not a parked step job or a retry), the add replaces that
              job's data, restarts its delay and restarts the window (name and options stay);
              otherwise it adds a new job (nothing is dropped). The window defaults to the delay.
]]
local DEDUP_MODES = { simple = 's', throttle = 't', extend = 'e', debounce = 'd' }
local DEDUP_MAX_ID_LEN = 512 -- bytes of a dedup id (src/engine/producing/options.ts agrees)
-- The longest dedup window, in ms (10 years of 365.25 days; src/engine/producing/options.ts MAX_DEDUP_TTL_MS
-- agrees): now + ttl stays far below 2^53, so a window end is stored and read back exactly.
local DEDUP_MAX_TTL = 315576000000
-- Defined in the block below, whose other locals stay inside it (the main chunk may hold at most 200).
local parseDedupEntry, checkDedup, applyDedup, recordDedup, dedupSweep, dedupEntryOver
do
local DEDUP_SWEEP_COUNT = 100

parseDedupEntry = function(v)
  local mode, expiresAt, jobId = string.match(v, '^(%a):(%d+):(.*)$')
  return mode, tonumber(expiresAt) or 0, jobId
end

local function dedupWindowOpen(expiresAt, now)
  return expiresAt == 0 or now < expiresAt
end

local function jobUnfinished(state)
  return state ~= false and state ~= nil and state ~= 'completed' and state ~= 'failed'
end

-- Delayed and never activated (an activation sets `fence`): data may still be replaced.
local function debounceable(f)
  return f[1] == 'delayed' and not f[2]
end

-- The dedup checks decodeArgs cannot express; raises ERR_INVALID naming `what` (the function and
-- the job). `ttl` and `delay` are numbers already checked, `mode` one of '', simple, throttle,
-- extend, debounce.
checkDedup = function(what, id, ttl, mode, delay)
  if id == '' then
    if mode ~= '' or ttl ~= 0 then
      refuse('ERR_INVALID', what .. ': dedupMode and dedupTtl need a dedupId (send "", 0, "" for no dedup)')
    end
    return
  end
  if mode == '' then refuse('ERR_INVALID', what .. ': a dedupId needs a dedupMode: simple, throttle, extend or debounce') end
  if (mode == 'throttle' or mode == 'extend') and ttl == 0 then
    refuse('ERR_INVALID', what .. ': ' .. mode .. ' dedup needs a ttl > 0 (dedupTtl)')
  end
  if mode == 'debounce' and delay <= 0 then
    refuse('ERR_INVALID', what .. ': debounce dedup needs a delay > 0 (the job waits out the quiet period)')
  end
end

-- An entry's window end as digits (tostring would write a large sum as 1.2e+15, which
-- parseDedupEntry could not read back).
local function dedupEntry(mode, expiresAt, jobId)
  return DEDUP_MODES[mode] .. ':' .. string.format('%.0f', expiresAt) .. ':' .. jobId
end

--[[ Decides an add with a dedup id before anything is created. `addId` is the id the add took
  (its custom id, or one from the counter): the events name it as the add that was dropped
  (BullMQ's deduplicatedJobId), next to the kept job and the dedup id.
  Returns 'new' (go ahead and record the entry with recordDedup once the job exists),
  or 'blocked', existingId, or 'debounced', existingId (the delayed job took the new data). ]]
applyDedup = function(k, now, dedupId, ttl, mode, data, delay, addId)
  local v = redis.call('HGET', k.dedup, dedupId)
  if not v then return 'new' end
  local _, _, existing = parseDedupEntry(v)
  -- Whether the entry still stands is the entry's to say (the mode and window of the add that
  -- wrote it, as BullMQ's key lives by the add that set it); what this add does then is its own.
  if not existing or existing == '' or dedupEntryOver(k, v, now) then return 'new' end
  local jk = jobKey(k, existing)
  local f = redis.call('HMGET', jk, 'state', 'fence')
  if mode == 'throttle' or mode == 'extend' or mode == 'simple' then
    -- extend: the window restarts at this add (the entry keeps pointing at the earlier job)
    if mode == 'extend' then redis.call('HSET', k.dedup, dedupId, dedupEntry('extend', now + ttl, existing)) end
    emit(k, 'deduplicated', existing, 'deduplicationId', dedupId, 'deduplicatedJobId', addId)
    return 'blocked', existing
  end
  if mode == 'debounce' and debounceable(f) then
    if ttl == 0 then ttl = delay end
    redis.call('HSET', jk, 'data', data, 'delay', delay)
    scheduleDue(k, existing, now + delay, now) -- (glidemq_add checked the wake key's type)
    redis.call('HSET', k.dedup, dedupId, dedupEntry('debounce', now + ttl, existing))
    emit(k, 'debounced', existing, 'deduplicationId', dedupId, 'deduplicatedJobId', addId)
    return 'debounced', existing
  end
  return 'new'
end

recordDedup = function(k, now, dedupId, ttl, mode, delay, jobId)
  if mode == 'debounce' and ttl == 0 then ttl = delay end
  local expiresAt = 0
  if ttl > 0 then expiresAt = now + ttl end
  redis.call('HSET', k.dedup, dedupId, dedupEntry(mode, expiresAt, jobId))
end

-- Whether an entry can no longer block or absorb any add. A job key another program replaced by
-- another type is no job: its entry is over (read with pcall, so that key cannot stop the sweep).
dedupEntryOver = function(k, v, now)
  local mode, expiresAt, jobId = parseDedupEntry(v)
  if not mode or not dedupWindowOpen(expiresAt, now) then return true end
  if mode == 't' or mode == 'e' then return false end
  local f = redis.pcall('HMGET', jobKey(k, jobId), 'state', 'fence')
  if f.err then return true end
  if mode == 's' then return not jobUnfinished(f[1]) end
  return not debounceable(f)
end

-- One bounded HSCAN step over the dedup hash (cursor kept in meta); deletes entries that are over.
-- All reads come first, then the writes. The caller checked that meta and dedup are hashes.
dedupSweep = function(k, now)
  if redis.call('EXISTS', k.dedup) == 0 then return 0 end
  local cursor = redis.call('HGET', k.meta, 'dedupCursor') or '0'
  if not string.find(cursor, '^%d+$') then cursor = '0' end -- written by another program: start over
  local r = redis.call('HSCAN', k.dedup, cursor, 'COUNT', DEDUP_SWEEP_COUNT)
  local over = {}
  local entries = r[2]
  for i = 1, #entries, 2 do
    if dedupEntryOver(k, entries[i + 1], now) then over[#over + 1] = entries[i] end
  end
  if #over > 0 then redis.call('HDEL', k.dedup, unpack(over)) end
  if r[1] == '0' then
    redis.call('HDEL', k.meta, 'dedupCursor')
  else
    redis.call('HSET', k.meta, 'dedupCursor', r[1])
  end
  return #over
end
end
