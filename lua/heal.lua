--[[ heal.lua — glidemq_healListActive: keeps the list-active-ids set and list-active counter true.
  Runs every 10th promotion tick of each worker, and from `glidemq heal`.
  Trusted set (seed marker `listActiveSeeded` present and at least as many members as the counter):
    members that are no longer active priority/LIFO/group claims are dropped and the counter is set
    from what is left; no SCAN.
  Otherwise (marker missing, or fewer members than the counter, e.g. claims made by an older
  library): the marker is cleared and the set is re-seeded from a SCAN over job hashes that resumes
  from meta `listActiveScanCursor`, at most maxPages pages per call, so a large keyspace
  completes over several calls. Only when the scan wraps are non-claims dropped, the counter set from
  the set, the marker set again and the cursor deleted. The counter never goes below zero.
  A member whose job key holds another type than a hash (another program wrote it) is no claim:
  it is dropped from the set; the key itself is never touched.
  Everything is read (members, job hashes, the scan) before the first write.
  KEYS[1]  meta key.
  ARGV[1]  check: '1' changes nothing and only reports what would change, '0' heals.
  ARGV[2]  maxPages: SCAN steps per call when re-seeding (1..500).
  Returns  {mode, counterBefore, counterAfter, membersDropped, membersAdded, seeded (1|0), cursor}
           mode: 'trusted' (set trusted, repaired without SCAN), 'scanning' (re-seed in progress;
           cursor is where the next call resumes), 'seeded' (this call's scan wrapped), 'untrusted'
           (check mode: a re-seed is needed), 'missing' (no such queue: nothing written). With
           check '1' the counts say what a heal would do.
  Errors   ERR_INVALID (check, maxPages), ERR_WRONG_TYPE (a key it writes holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local HEAL_MAX_PAGES = 500
local HEAL_ARGS = { 'check', ARG.flag, 'maxPages', ARG.int(1, HEAL_MAX_PAGES) }
local HEAL_WRITES = { 'meta', 'hash', 'listActiveIds', 'set', 'listActive', 'string' }

-- The members of `members` that are not active list claims (read only).
local function nonClaims(k, members)
  local out = {}
  for _, id in ipairs(members) do
    local f = jobFieldsOrNil(jobKey(k, id), 'state', 'src')
    if not (f and isListClaim(f[1], f[2])) then out[#out + 1] = id end
  end
  return out
end

local function sremAll(key, ids)
  for _, id in ipairs(ids) do redis.call('SREM', key, id) end
end

register('glidemq_healListActive', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_healListActive', args, HEAL_ARGS)
  requireTypes(k, HEAL_WRITES)
  -- a queue that does not exist is not created by healing it
  if redis.call('EXISTS', k.meta) == 0 then return { 'missing', 0, 0, 0, 0, 0, '0' } end
  local counter = toInt(redis.call('GET', k.listActive), 0)
  local before = counter < 0 and 0 or counter
  if listActiveTrusted(k) then
    local members = redis.call('SMEMBERS', k.listActiveIds)
    local drop = nonClaims(k, members)
    local after = #members - #drop
    if not a.check then
      sremAll(k.listActiveIds, drop)
      if counter ~= after then redis.call('SET', k.listActive, after) end
    end
    return { 'trusted', before, after, #drop, 0, 1, '0' }
  end
  local cursor = redis.call('HGET', k.meta, 'listActiveScanCursor') or '0'
  if not string.find(cursor, '^%d+$') then cursor = '0' end -- not a SCAN cursor: start over
  if a.check then return { 'untrusted', before, before, 0, 0, 0, cursor } end
  -- read phase: this call's part of the scan, and (when it wraps) the members that are no claims;
  -- what the scan found is a claim, so the non-claims are among the members held before it
  local found, nextCursor = scanListClaims(k, cursor, a.maxPages)
  local drop = {}
  if nextCursor == '0' then drop = nonClaims(k, redis.call('SMEMBERS', k.listActiveIds)) end
  -- the set is not trusted until a scan has covered the whole keyspace
  redis.call('HDEL', k.meta, 'listActiveSeeded')
  local added = 0
  for _, id in ipairs(found) do
    added = added + redis.call('SADD', k.listActiveIds, id)
  end
  if nextCursor ~= '0' then
    redis.call('HSET', k.meta, 'listActiveScanCursor', nextCursor)
    return { 'scanning', before, before, 0, added, 0, nextCursor }
  end
  sremAll(k.listActiveIds, drop)
  local after = redis.call('SCARD', k.listActiveIds)
  redis.call('SET', k.listActive, after)
  redis.call('HSET', k.meta, 'listActiveSeeded', '1')
  redis.call('HDEL', k.meta, 'listActiveScanCursor')
  return { 'seeded', before, after, #drop, added, 1, '0' }
end)
end
