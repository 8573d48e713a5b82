--[[ dedup.lua — shared locals for deduplication (used by glidemq_add and glidemq_upkeep).
  The `<base>:dedup` hash maps a dedup id to `<mode>:<expiresAt>:<jobId>`: the mode letter of the
  add that wrote it (s simple, t throttle, d debounce), when its window ends (ms; 0 = no end) and
  the job it points at. Valkey 8 has no per-field TTL, so these functions keep it: an entry that
  is over is ignored and overwritten when an add meets it, and the promotion tick's bounded sweep
  (dedupSweep) deletes the ones nobody meets again.
  Modes, as the new add asks:
    simple    blocked while the earlier job is not finished (and, with a ttl, its window is open).
    throttle  blocked while the window (ttl from the first add) is open, whatever the job does.
    debounce  while the window is open and the earlier job is still waiting out its first delay
              (delayed and never run: not a parked step job or a retry), the add replaces that
              job's data, restarts its delay and restarts the window (name and options stay);
              otherwise it adds a new job (nothing is dropped). The window defaults to the delay.
]]
local DEDUP_MODES = { simple = 's', throttle = 't', debounce = 'd' }
local DEDUP_SWEEP_COUNT = 100

local function parseDedupEntry(v)
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

-- Checks one job's dedup arguments; returns an error reply or nil.
local function validateDedup(label, id, ttl, mode, delay)
  if id == '' then
    if mode ~= '' then return fail('ERR_INVALID', label .. ': a dedup mode needs a dedup id') end
    return nil
  end
  if #id > 512 then return fail('ERR_INVALID', label .. ': a dedup id may be at most 512 bytes') end
  if not DEDUP_MODES[mode] then
    return fail('ERR_INVALID', label .. ': dedup mode must be simple, throttle or debounce, got "' .. tostring(mode) .. '"')
  end
  if not ttl or ttl < 0 or ttl ~= math.floor(ttl) then
    return fail('ERR_INVALID', label .. ': dedup ttl must be a whole number of ms >= 0')
  end
  if mode == 'throttle' and ttl == 0 then return fail('ERR_INVALID', label .. ': throttle dedup needs a ttl > 0') end
  if mode == 'debounce' and not (delay and delay > 0) then
    return fail('ERR_INVALID', label .. ': debounce dedup needs a delay > 0 (the job waits out the quiet period)')
  end
  return nil
end

--[[ Decides an add with a dedup id before anything is created.
  Returns 'new' (go ahead and record the entry with recordDedup once the job exists),
  or 'blocked', existingId, or 'debounced', existingId (the delayed job took the new data). ]]
local function applyDedup(k, now, dedupId, ttl, mode, data, delay)
  local v = redis.call('HGET', k.dedup, dedupId)
  if not v then return 'new' end
  local _, expiresAt, existing = parseDedupEntry(v)
  if not existing or not dedupWindowOpen(expiresAt, now) then return 'new' end
  local jk = jobKey(k, existing)
  local f = redis.call('HMGET', jk, 'state', 'fence')
  if mode == 'throttle' or (mode == 'simple' and jobUnfinished(f[1])) then
    emit(k, 'deduplicated', existing, 'dedupId', dedupId)
    return 'blocked', existing
  end
  if mode == 'debounce' and debounceable(f) then
    if ttl == 0 then ttl = delay end
    redis.call('HSET', jk, 'data', data, 'delay', delay)
    redis.call('ZADD', k.scheduled, now + delay, existing)
    redis.call('HSET', k.dedup, dedupId, 'd:' .. (now + ttl) .. ':' .. existing)
    emit(k, 'debounced', existing, 'dedupId', dedupId)
    return 'debounced', existing
  end
  return 'new'
end

local function recordDedup(k, now, dedupId, ttl, mode, delay, jobId)
  if mode == 'debounce' and ttl == 0 then ttl = delay end
  local expiresAt = 0
  if ttl > 0 then expiresAt = now + ttl end
  redis.call('HSET', k.dedup, dedupId, DEDUP_MODES[mode] .. ':' .. expiresAt .. ':' .. jobId)
end

-- Whether an entry can no longer block or absorb any add.
local function dedupEntryOver(k, v, now)
  local mode, expiresAt, jobId = parseDedupEntry(v)
  if not mode or not dedupWindowOpen(expiresAt, now) then return true end
  if mode == 't' then return false end
  local f = redis.call('HMGET', jobKey(k, jobId), 'state', 'fence')
  if mode == 's' then return not jobUnfinished(f[1]) end
  return not debounceable(f)
end

-- One bounded HSCAN step over the dedup hash (cursor kept in meta); deletes entries that are over.
local function dedupSweep(k, now)
  if redis.call('EXISTS', k.dedup) == 0 then return 0 end
  local cursor = redis.call('HGET', k.meta, 'dedupCursor') or '0'
  local r = redis.call('HSCAN', k.dedup, cursor, 'COUNT', DEDUP_SWEEP_COUNT)
  local removed = 0
  local entries = r[2]
  for i = 1, #entries, 2 do
    if dedupEntryOver(k, entries[i + 1], now) then
      redis.call('HDEL', k.dedup, entries[i])
      removed = removed + 1
    end
  end
  if r[1] == '0' then
    redis.call('HDEL', k.meta, 'dedupCursor')
  else
    redis.call('HSET', k.meta, 'dedupCursor', r[1])
  end
  return removed
end
