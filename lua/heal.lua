--[[ heal.lua — glidemq_healListActive: keeps the list-active-ids set and list-active counter true.
  Runs every 10th promotion tick of each worker, and from `glidemq heal`.
  Trusted set (seed marker `listActiveSeeded` present and at least as many members as the counter):
    members that are no longer active priority/LIFO claims are dropped and the counter is set from
    what is left; no SCAN.
  Otherwise (marker missing, or fewer members than the counter, e.g. claims made by an older
  library): the marker is cleared and the set is re-seeded from a SCAN over job hashes that resumes
  from meta `listActiveScanCursor`, at most HEAL_MAX_PAGES pages per call, so a large keyspace
  completes over several calls. Only when the scan wraps are non-claims dropped, the counter set from
  the set, the marker set again and the cursor deleted. The counter never goes below zero.
  KEYS[1]  meta key.
  ARGV     check ('1' = change nothing, only report what would change), maxPages (1..500, default 500).
  Returns  {mode, counterBefore, counterAfter, membersDropped, membersAdded, seeded (1|0), cursor}
           mode: 'trusted' (set trusted, repaired without SCAN), 'scanning' (re-seed in progress;
           cursor is where the next call resumes), 'seeded' (this call's scan wrapped), 'untrusted'
           (check mode: a re-seed is needed), 'missing' (no such queue: nothing written). With
           check '1' the counts say what a heal would do.
  Errors   ERR_INVALID for a bad check flag or page count.
]]
local HEAL_MAX_PAGES = 500

-- Drops set members that are not active list claims; returns how many (would be) dropped.
local function dropNonClaims(k, check)
  local dropped = 0
  for _, id in ipairs(redis.call('SMEMBERS', k.listActiveIds)) do
    local f = redis.call('HMGET', jobKey(k, id), 'state', 'src')
    if not isListClaim(f[1], f[2]) then
      dropped = dropped + 1
      if not check then redis.call('SREM', k.listActiveIds, id) end
    end
  end
  return dropped
end

redis.register_function('glidemq_healListActive', function(keys, args)
  local k = keysFor(keys[1])
  local checkFlag, maxPages = args[1] or '0', toInt(args[2], HEAL_MAX_PAGES)
  if not validFlag(checkFlag) then return fail('ERR_INVALID', "check flag must be '0' or '1'") end
  if maxPages < 1 or maxPages > HEAL_MAX_PAGES then
    return fail('ERR_INVALID', 'pages per call must be from 1 to ' .. HEAL_MAX_PAGES)
  end
  local check = checkFlag == '1'
  -- a queue that does not exist is not created by healing it
  if redis.call('EXISTS', k.meta) == 0 then return { 'missing', 0, 0, 0, 0, 0, '0' } end
  local counter = toInt(redis.call('GET', k.listActive), 0)
  local before = counter < 0 and 0 or counter
  if listActiveTrusted(k) then
    local members = redis.call('SCARD', k.listActiveIds)
    local dropped = dropNonClaims(k, check)
    local after = members - dropped
    if not check and counter ~= after then redis.call('SET', k.listActive, after) end
    return { 'trusted', before, after, dropped, 0, 1, '0' }
  end
  if check then
    return { 'untrusted', before, before, 0, 0, 0, redis.call('HGET', k.meta, 'listActiveScanCursor') or '0' }
  end
  -- the set is not trusted until a scan has covered the whole keyspace
  redis.call('HDEL', k.meta, 'listActiveSeeded')
  local cursor = redis.call('HGET', k.meta, 'listActiveScanCursor') or '0'
  local found, nextCursor = scanListClaims(k, cursor, maxPages)
  local added = 0
  for _, id in ipairs(found) do
    added = added + redis.call('SADD', k.listActiveIds, id)
  end
  if nextCursor ~= '0' then
    redis.call('HSET', k.meta, 'listActiveScanCursor', nextCursor)
    return { 'scanning', before, before, 0, added, 0, nextCursor }
  end
  local dropped = dropNonClaims(k, false)
  local after = redis.call('SCARD', k.listActiveIds)
  redis.call('SET', k.listActive, after)
  redis.call('HSET', k.meta, 'listActiveSeeded', '1')
  redis.call('HDEL', k.meta, 'listActiveScanCursor')
  return { 'seeded', before, after, dropped, added, 1, '0' }
end)
