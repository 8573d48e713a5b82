--[[ reclaim.lua — glidemq_reclaimStalled, glidemq_reclaimStalledListJobs
  Stalled recovery, as each worker's scheduler runs it every stalledInterval (and `glidemq reclaim`).
  A stalled claim counts a stall (stalledCount + 1) and the job is redispatched while
  stalledCount <= maxStalledCount, else failed with the reason `job stalled more than
  maxStalledCount`. Redispatch leaves the job waiting with no owner: the old worker's fence no
  longer matches, so its late finish/progress/heartbeat is a visible no-op ('stale').
  A job whose hash is gone (removed) is never re-created: what still names it is dropped.
  Neither function does anything while the queue is paused. With dryRun '1' nothing is written:
  the replies list what would be redispatched and failed.

  glidemq_reclaimStalled — the job stream's pending entries list, through XAUTOCLAIM.
    KEYS[1] meta key.
    ARGV    consumer (claims pass through it for the length of the call), now(ms), minIdle(ms,
            the lockDuration), maxStalledCount, consumerIdleMs (stale-consumer threshold; see
            consumer-cleanup.lua), dryRun ('1'|'0'), cursor (stream id to resume from, '0-0' first).
    Returns {'paused'} or {'ok', {redispatched ids}, {failed ids}, consumersRemoved, nextCursor,
            dropped}: at most RECLAIM_MAX_PAGES pages of RECLAIM_PAGE entries are walked per call;
            nextCursor '0-0' means the walk wrapped, anything else is where the next call resumes.
            dropped counts entries of removed jobs and superseded entries that were acked and deleted.
    A delivered entry that was never activated (state still waiting with that entry id: a worker
    died between its read and its activation) is an un-activated claim and counts a stall too.

  glidemq_reclaimStalledListJobs — claimed priority/LIFO jobs (no pending entry).
    KEYS[1] meta key.
    ARGV    now(ms), minIdle(ms; a claim whose lockedAt is older is stalled), maxStalledCount, dryRun.
    Candidates come from the list-active-ids set while it is trusted (see list-active.lua); else
    from the set plus a bounded SCAN over job hashes (at most LIST_RECLAIM_MAX_STEPS steps per call,
    from cursor 0), so on a very large keyspace a stalled claim past that bound can stay unfound
    until healListActive has re-seeded the set.
    Returns {'paused'} or {'ok', {redispatched ids}, {failed ids}, source ('set'|'scan'), scanSteps}.

  Errors: ERR_INVALID for malformed arguments (checked before any write).
]]
local STALLED_REASON = 'job stalled more than maxStalledCount'
local RECLAIM_PAGE = 100
local RECLAIM_MAX_PAGES = 10
local LIST_RECLAIM_MAX_STEPS = 1000

local function checkReclaimArgs(minIdle, maxStalled, dry)
  if not minIdle or minIdle < 0 then return fail('ERR_INVALID', 'minimum idle time must be a number of ms >= 0') end
  if not maxStalled or maxStalled < 0 or maxStalled ~= math.floor(maxStalled) then
    return fail('ERR_INVALID', 'maxStalledCount must be a whole number >= 0')
  end
  if not validFlag(dry) then return fail('ERR_INVALID', "dry run flag must be '0' or '1'") end
  return nil
end

-- Counts a stall for a job already taken out of active delivery state, then redispatches or fails it.
-- Returns true when redispatched.
local function stallJob(k, id, jk, now, maxStalled)
  local n = redis.call('HINCRBY', jk, 'stalledCount', 1)
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src', 'sid')
  emit(k, 'stalled', id, 'stalledCount', n)
  if n <= maxStalled then
    requeue(k, id, jk)
    return true
  end
  redis.call('HSET', jk, 'state', 'failed', 'failedReason', STALLED_REASON, 'finishedOn', now)
  redis.call('ZADD', k.failed, now, id)
  emit(k, 'failed', id, 'reason', STALLED_REASON)
  return false
end

local function wouldRedispatch(jk, maxStalled)
  return toInt(redis.call('HGET', jk, 'stalledCount'), 0) + 1 <= maxStalled
end

-- One pending entry past the idle threshold. `id` is the job id the entry names (nil if unreadable).
local function reclaimEntry(k, sid, id, now, maxStalled, dry, out)
  local f = {}
  local jk
  if id then
    jk = jobKey(k, id)
    f = redis.call('HMGET', jk, 'state', 'sid', 'src')
  end
  local claim = f[2] == sid and (f[1] == 'waiting' or (f[1] == 'active' and f[3] == 's'))
  if not claim then
    -- a removed job, or an entry a redispatch or hand-back already superseded
    if not dry then
      redis.call('XACK', k.stream, GROUP, sid)
      redis.call('XDEL', k.stream, sid)
    end
    out.dropped = out.dropped + 1
    return
  end
  local redispatch
  if dry then
    redispatch = wouldRedispatch(jk, maxStalled)
  else
    redis.call('XACK', k.stream, GROUP, sid)
    redis.call('XDEL', k.stream, sid)
    redispatch = stallJob(k, id, jk, now, maxStalled)
  end
  local into = redispatch and out.redispatched or out.failed
  into[#into + 1] = id
end

-- Dry run: XPENDING lists idle entries without claiming them; the cursor is the last id seen.
local function pendingPage(k, minIdle, cursor)
  local start = cursor == '0-0' and '-' or ('(' .. cursor)
  local pend = redis.call('XPENDING', k.stream, GROUP, 'IDLE', minIdle, start, '+', RECLAIM_PAGE)
  local entries = {}
  for _, p in ipairs(pend) do
    local e = redis.call('XRANGE', k.stream, p[1], p[1])
    entries[#entries + 1] = { p[1], e[1] and e[1][2] or false }
  end
  local nextCursor = '0-0'
  if #pend == RECLAIM_PAGE then nextCursor = pend[#pend][1] end
  return entries, nextCursor, 0
end

local function autoclaimPage(k, consumer, minIdle, cursor)
  local r = redis.call('XAUTOCLAIM', k.stream, GROUP, consumer, minIdle, cursor, 'COUNT', RECLAIM_PAGE)
  -- r[3]: pending ids whose entries were deleted; XAUTOCLAIM has already dropped them from the PEL
  return r[2], r[1], r[3] and #r[3] or 0
end

local function entryJobId(fields)
  if type(fields) ~= 'table' then return nil end
  for i = 1, #fields, 2 do
    if fields[i] == 'id' then return fields[i + 1] end
  end
  return nil
end

redis.register_function('glidemq_reclaimStalled', function(keys, args)
  local k = keysFor(keys[1])
  local consumer, now = args[1], tonumber(args[2])
  local minIdle, maxStalled, consumerIdle = tonumber(args[3]), tonumber(args[4]), tonumber(args[5])
  local dryFlag, cursor = args[6], args[7] or '0-0'
  if not consumer or consumer == '' then return fail('ERR_INVALID', 'reclaim needs a consumer name') end
  if not now then return fail('ERR_INVALID', 'now must be a time in ms') end
  local bad = checkReclaimArgs(minIdle, maxStalled, dryFlag)
  if bad then return bad end
  if not consumerIdle or consumerIdle < 0 then return fail('ERR_INVALID', 'consumer idle threshold must be a number of ms >= 0') end
  if not string.match(cursor, '^%d+%-%d+$') then return fail('ERR_INVALID', 'cursor must be a stream id such as 0-0') end
  if isPaused(k) then return { 'paused' } end
  local dry = dryFlag == '1'
  local out = { redispatched = {}, failed = {}, dropped = 0 }
  if redis.call('EXISTS', k.stream) == 0 then return { 'ok', {}, {}, 0, '0-0', 0 } end
  local pages = 0
  repeat
    pages = pages + 1
    local entries, gone
    local ok, err = pcall(function()
      if dry then
        entries, cursor, gone = pendingPage(k, minIdle, cursor)
      else
        entries, cursor, gone = autoclaimPage(k, consumer, minIdle, cursor)
      end
    end)
    if not ok then
      local msg = type(err) == 'table' and err.err or tostring(err)
      if string.find(tostring(msg), 'NOGROUP') then
        cursor = '0-0'
        break
      end
      error(err)
    end
    out.dropped = out.dropped + gone
    for _, e in ipairs(entries) do
      reclaimEntry(k, e[1], entryJobId(e[2]), now, maxStalled, dry, out)
    end
  until cursor == '0-0' or pages >= RECLAIM_MAX_PAGES
  local removed = removeStaleConsumers(k, consumer, consumerIdle, dry)
  return { 'ok', out.redispatched, out.failed, removed, cursor, out.dropped }
end)

redis.register_function('glidemq_reclaimStalledListJobs', function(keys, args)
  local k = keysFor(keys[1])
  local now, minIdle, maxStalled, dryFlag = tonumber(args[1]), tonumber(args[2]), tonumber(args[3]), args[4]
  if not now then return fail('ERR_INVALID', 'now must be a time in ms') end
  local bad = checkReclaimArgs(minIdle, maxStalled, dryFlag)
  if bad then return bad end
  if isPaused(k) then return { 'paused' } end
  local dry = dryFlag == '1'
  if redis.call('EXISTS', k.meta) == 0 then return { 'ok', {}, {}, 'set', 0 } end
  local ids = redis.call('SMEMBERS', k.listActiveIds)
  local source, steps = 'set', 0
  if not listActiveTrusted(k) then
    source = 'scan'
    local seen = {}
    for _, id in ipairs(ids) do seen[id] = true end
    local found, _, taken = scanListClaims(k, '0', LIST_RECLAIM_MAX_STEPS)
    steps = taken
    for _, id in ipairs(found) do
      if not seen[id] then
        seen[id] = true
        ids[#ids + 1] = id
      end
    end
  end
  local redispatched, failed = {}, {}
  for _, id in ipairs(ids) do
    local jk = jobKey(k, id)
    local f = redis.call('HMGET', jk, 'state', 'src', 'lockedAt')
    if isListClaim(f[1], f[2]) and now - toInt(f[3], 0) >= minIdle then
      local redispatch
      if dry then
        redispatch = wouldRedispatch(jk, maxStalled)
      else
        listRelease(k, id)
        redispatch = stallJob(k, id, jk, now, maxStalled)
      end
      local into = redispatch and redispatched or failed
      into[#into + 1] = id
    end
  end
  return { 'ok', redispatched, failed, source, steps }
end)
