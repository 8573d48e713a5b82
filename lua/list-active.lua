--[[ list-active.lua — shared locals for finding claimed priority/LIFO jobs (no registered functions).
  Priority, LIFO and group jobs are popped from lists and have no pending entry. Every list claim and
  release keeps the `list-active-ids` set and the `list-active` counter together (helpers.lua);
  the set is trusted once one complete SCAN has seeded it (meta `listActiveSeeded`) and while it
  has at least as many members as the counter. Otherwise claims are found by a SCAN over job hashes.
]]
local SCAN_PAGE = 100 -- COUNT hint of one SCAN step

-- True for a job hash that is an active list claim: priority 'p', LIFO 'l' or group 'g' (anything
-- but a stream claim 's').
local function isListClaim(state, src)
  return state == 'active' and src ~= nil and src ~= false and src ~= 's'
end

-- HMGET of `...` from job hash `key`, or nil when the key holds another type (another program
-- wrote it). Recovery and listing paths skip such a key, and never write it, instead of failing
-- for the whole queue on every call (heal drops it from list-active-ids).
local function jobFieldsOrNil(key, ...)
  local f = redis.pcall('HMGET', key, ...)
  if type(f) == 'table' and not f.err then return f end
  return nil
end

-- The job id job stream entry `sid` carries (its 'id' field), or nil for an entry that is gone
-- (or has no such field). Claim listing and recovery read pending entries through it.
local function streamEntryJobId(k, sid)
  local e = redis.call('XRANGE', k.stream, sid, sid)[1]
  if not e then return nil end
  local fields = e[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'id' then return fields[i + 1] end
  end
  return nil
end

-- A list claim's lock age in ms at the server's TIME `now`, and whether its lockedAt lies in the
-- future (written from a clock ahead of the server's: the age counts as 0, see reclaim.lua). A
-- lockedAt that is missing or not a time (negative, 'nan', 'inf') counts as never locked: age `now`.
local function lockAge(lockedAt, now)
  local at = tonumber(lockedAt)
  if not at or at ~= at or at < 0 or at == math.huge then return now, false end
  if at > now then return 0, true end
  return now - math.floor(at), false
end

local function listActiveTrusted(k)
  if redis.call('HGET', k.meta, 'listActiveSeeded') ~= '1' then return false end
  return redis.call('SCARD', k.listActiveIds) >= toInt(redis.call('GET', k.listActive), 0)
end

-- A SCAN pattern matching this queue's job hashes, with glob characters of the prefix escaped.
local function jobScanPattern(k)
  return (string.gsub(k.jobPrefix, '([%*%?%[%]\\])', '\\%1')) .. '*'
end

-- Walks at most `maxSteps` SCAN steps from `cursor` and returns (ids of list claims found, next
-- cursor, steps taken). A next cursor of '0' means the scan wrapped: the keyspace was covered.
local function scanListClaims(k, cursor, maxSteps)
  local found, steps = {}, 0
  local pattern, plen = jobScanPattern(k), #k.jobPrefix
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', SCAN_PAGE)
    cursor, steps = r[1], steps + 1
    for _, key in ipairs(r[2]) do
      local id = string.sub(key, plen + 1)
      -- job ids never contain ':' (job:<id>:logs and other sub-keys are skipped)
      if id ~= '' and not string.find(id, ':', 1, true) then
        local f = jobFieldsOrNil(key, 'state', 'src')
        if f and isListClaim(f[1], f[2]) then found[#found + 1] = id end
      end
    end
  until cursor == '0' or steps >= maxSteps
  return found, cursor, steps
end
