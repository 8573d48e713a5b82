--[[ reclaim.lua — glidemq_reclaimStalled, glidemq_reclaimStalledListJobs
  Stalled recovery, as each worker's scheduler runs it every stalledInterval (and `glidemq reclaim`).
  A stalled claim counts a stall (stalledCount + 1) and the job is redispatched while
  stalledCount <= maxStalledCount, else failed with the reason `job stalled more than
  maxStalledCount`. Redispatch leaves the job waiting with no owner: the old worker's fence no
  longer matches, so its late finish/progress/heartbeat is a visible no-op ('stale').
  A job whose hash is gone (removed) is never re-created: what still names it is dropped. A job
  key another program overwrote with another type is treated the same way and never written.
  Neither function does anything while the queue is paused. With dryRun '1' nothing is written:
  the replies list what would be redispatched and failed.
  Time: every age is the server's. Stream claims' idle times are the pending entries list's
  (kept by the server); list claims' ages are the server's TIME minus `lockedAt`, which the claim
  and heartbeat paths write from the server's TIME too. No caller's clock decides a reclaim. An
  age counts only from the server's epoch (its start, or its promotion: lua/epoch.lua): until the
  server has served for minIdle nothing is stalled, so an outage or a failover shorter than the
  lock never takes a live worker's job (each function records the epoch in meta, epochId and
  epochAt, unless it is a dry run).
  A claim still marked not started (`ns` holds its fence: a worker's prefetch no processor took
  yet, lua/activate.lua) is given back without a stall: its stalledCount stays, the attempt is
  marked `nsr` (its next claims are not marked, so it gets this once), no 'stalled' event is
  written, and its id is listed under `returned` instead.
  Both functions read everything they decide on (pending entries, job hashes) before the first
  write, and check the type of every queue key they may write, so a refused call writes nothing.

  glidemq_reclaimStalled — the job stream's pending entries list.
    KEYS[1]  meta key.
    ARGV[1]  consumer: the calling worker's consumer; never deleted as a stale consumer.
    ARGV[2]  minIdle: ms a pending entry must be idle (server idle time) to count as stalled (the lockDuration).
    ARGV[3]  maxStalledCount: stalls a job may have and still be redispatched (whole number >= 0).
    ARGV[4]  consumerIdleMs: stale-consumer threshold in ms (see consumer-cleanup.lua).
    ARGV[5]  dryRun: '1' changes nothing and reports what would be done, '0' reclaims.
    ARGV[6]  cursor: where the walk resumes: the previous call's nextCursor ('0-0' for the start).
    Returns  {'paused'} or {'ok', {redispatched ids}, {failed ids}, consumersRemoved, nextCursor,
             dropped, {returned ids}}: at most RECLAIM_MAX_PAGES pages of RECLAIM_PAGE entries are claimed per call
             through XAUTOCLAIM (claims pass through `consumer` for the length of the call; the
             server's idle time decides), then acked and deleted: a claim's job is redispatched or
             failed, any other entry just goes. nextCursor '0-0' means the walk wrapped, anything
             else is where the next call resumes (a dry run lists with XPENDING IDLE instead and
             its cursor is the last entry it listed: pass it back only to a dry run). dropped counts
             entries of removed jobs and superseded entries that were acked and deleted.
             The entries XAUTOCLAIM can claim are read first (XPENDING IDLE over the same range,
             with their job hashes), so every check is made before its first write.
    A delivered entry that was never activated (state still waiting with that entry id: a worker
    died between its read and its activation) is an un-activated claim and counts a stall too.

  glidemq_reclaimStalledListJobs — claimed priority/LIFO/group jobs (no pending entry).
    KEYS[1]  meta key.
    ARGV[1]  minIdle: ms; a claim whose lock age (server TIME - lockedAt) is at least this is stalled.
    ARGV[2]  maxStalledCount: stalls a job may have and still be redispatched (whole number >= 0).
    ARGV[3]  dryRun: '1' changes nothing and reports what would be done, '0' reclaims.
    Candidates come from the list-active-ids set while it is trusted (see list-active.lua); else
    from the set plus a bounded SCAN over job hashes (at most LIST_RECLAIM_MAX_STEPS steps per call,
    from cursor 0), so on a very large keyspace a stalled claim past that bound can stay unfound
    until healListActive has re-seeded the set.
    A lockedAt in the future (written by a client of an older library from its own clock, or seen
    after a failover to a server whose clock is behind) counts as age 0, and (not in a dry run) is
    set to the server's TIME: the claim is then reclaimed minIdle later unless its worker heartbeats.
    So a skewed clock can neither get a live claim reclaimed nor make a dead one immune forever.
    Returns  {'paused'} or {'ok', {redispatched ids}, {failed ids}, source ('set'|'scan'), scanSteps,
             {returned ids}}.

  Errors   ERR_INVALID (an argument, named), ERR_WRONG_TYPE (a key it writes holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local STALLED_REASON = 'job stalled more than maxStalledCount'
local RECLAIM_PAGE = 100
local RECLAIM_MAX_PAGES = 10
local LIST_RECLAIM_MAX_STEPS = 1000

local RECLAIM_ARGS = { 'consumer', ARG.nonEmpty, 'minIdle', ARG.ms, 'maxStalledCount', ARG.int(0, 1000000000),
  'consumerIdleMs', ARG.ms, 'dryRun', ARG.flag, 'cursor', ARG.streamId }
local RECLAIM_LIST_ARGS = { 'minIdle', ARG.ms, 'maxStalledCount', ARG.int(0, 1000000000), 'dryRun', ARG.flag }
-- What a stall writes: the job stream (ack, delete, re-add), the failed set and events, and where
-- requeue puts a job (prioritized, lifo, wake, meta's sequences, the group sets); list claims also
-- release list-active-ids / list-active.
local RECLAIM_WRITES = { 'meta', 'hash', 'stream', 'stream', 'wake', 'stream', 'events', 'stream', 'failed', 'zset',
  'prioritized', 'zset', 'lifo', 'list', 'readyGroups', 'zset', 'timedGroups', 'zset' }
local RECLAIM_LIST_WRITES = { 'meta', 'hash', 'stream', 'stream', 'wake', 'stream', 'events', 'stream', 'failed', 'zset',
  'prioritized', 'zset', 'lifo', 'list', 'readyGroups', 'zset', 'timedGroups', 'zset', 'listActiveIds', 'set',
  'listActive', 'string' }

-- Counts a stall for a job already taken out of active delivery state (`n`: its stalledCount with
-- this stall, from the read phase: set, not HINCRBY, which a non-integer field would refuse
-- halfway), then redispatches or fails it. Returns true when redispatched. A job failed here gets
-- the next fence (`fence`, from the read phase): a finish of the stalled claim that arrives later
-- must not look like the repeat of a finish that stored this outcome (lua/finish.lua).
local function stallJob(k, id, jk, now, n, maxStalled, fence)
  redis.call('HSET', jk, 'stalledCount', n)
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src', 'sid')
  emit(k, 'stalled', id, 'stalledCount', n)
  if n <= maxStalled then
    requeue(k, id, jk)
    return true
  end
  redis.call('HSET', jk, 'state', 'failed', 'failedReason', STALLED_REASON, 'finishedOn', now, 'fence', fence)
  redis.call('ZADD', k.failed, now, id)
  emit(k, 'failed', id, 'reason', STALLED_REASON)
  return false
end

-- Gives back a claim that no processor took (see the header): requeued with its stalledCount as it
-- was, this attempt marked as given back once.
local function returnUnstarted(k, id, jk)
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src', 'sid', 'ns')
  redis.call('HSET', jk, 'nsr', '1')
  requeue(k, id, jk)
end

-- Whether job fields `state`, `fence` and `ns` are those of a claim marked not started.
local function unstarted(state, fence, ns)
  return state == 'active' and ns ~= nil and ns ~= false and ns == fence
end

-- A job's stalledCount after one more stall (a field that is no whole number >= 0 counts as 0).
local function stallsAfter(field)
  local n = tonumber(field)
  if not n or n ~= n or n < 0 or n > 1000000000 then n = 0 end
  return math.floor(n) + 1
end

-- Read phase of the stream walk: the pending entries idle at least minIdle from `a.cursor`, as
-- many as RECLAIM_MAX_PAGES pages of XAUTOCLAIM can claim (each claimed entry is one of the first
-- RECLAIM_PAGE * RECLAIM_MAX_PAGES of them). Each becomes { sid, id, jk, claim, redispatch };
-- claims' group keys are type-checked. `inclusive`: the cursor is XAUTOCLAIM's (the next id to
-- look at), else the last id a dry run listed. Returns the entries by sid, the ids in order, the
-- cursor after them ('0-0' when the walk wrapped), and false when the stream has no group.
local function streamCandidates(k, a, inclusive)
  local bySid, order, cursor = {}, {}, a.cursor
  for page = 1, RECLAIM_MAX_PAGES do
    local start = '(' .. cursor
    if cursor == '0-0' and page == 1 then start = '-' elseif inclusive and page == 1 then start = cursor end
    local pend = callUnless('NOGROUP', 'XPENDING', k.stream, GROUP, 'IDLE', a.minIdle, start, '+', RECLAIM_PAGE)
    if not pend then return bySid, order, '0-0', false end
    for _, p in ipairs(pend) do
      local c = { sid = p[1], claim = false }
      c.id = streamEntryJobId(k, p[1])
      if c.id then
        c.jk = jobKey(k, c.id)
        local f = jobFieldsOrNil(c.jk, 'state', 'sid', 'src', 'stalledCount', 'grp', 'fence', 'ns')
        -- a claim: the job's current entry, delivered (waiting) or activated from the stream;
        -- anything else is a removed job or an entry a redispatch or hand-back already superseded
        if f and f[2] == p[1] and (f[1] == 'waiting' or (f[1] == 'active' and f[3] == 's')) then
          c.claim = true
          c.stalls = stallsAfter(f[4])
          c.redispatch = c.stalls <= a.maxStalledCount
          c.fence = toInt(f[6], 0) + 1
          c.unstarted = unstarted(f[1], f[6], f[7])
          if f[5] then groupRequireTypes(k, f[5]) end
        end
      end
      bySid[c.sid] = c
      order[#order + 1] = c.sid
    end
    if #pend < RECLAIM_PAGE then return bySid, order, '0-0', true end
    cursor = pend[#pend][1]
  end
  return bySid, order, cursor, true
end

-- Takes one entry read in the read phase, claimed by XAUTOCLAIM (or listed by a dry run).
local function reclaimEntry(k, a, c, now, out)
  if not a.dryRun then
    redis.call('XACK', k.stream, GROUP, c.sid)
    redis.call('XDEL', k.stream, c.sid)
  end
  if not c.claim then
    out.dropped = out.dropped + 1
    return
  end
  if c.unstarted then
    if not a.dryRun then returnUnstarted(k, c.id, c.jk) end
    out.returned[#out.returned + 1] = c.id
    return
  end
  local redispatch = c.redispatch
  if not a.dryRun then redispatch = stallJob(k, c.id, c.jk, now, c.stalls, a.maxStalledCount, c.fence) end
  local into = redispatch and out.redispatched or out.failed
  into[#into + 1] = c.id
end

register('glidemq_reclaimStalled', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_reclaimStalled', args, RECLAIM_ARGS)
  requireTypes(k, RECLAIM_WRITES)
  if isPaused(k) then return { 'paused' } end
  if redis.call('EXISTS', k.stream) == 0 then return { 'ok', {}, {}, 0, '0-0', 0, {} } end
  local now = serverNow()
  -- time the server was down or not yet primary is no claim's idle time (lua/epoch.lua)
  local serving, epoch = servingFor(k.meta, now)
  if serving < a.minIdle then
    if not a.dryRun then recordEpoch(k.meta, epoch) end
    return { 'ok', {}, {}, removeStaleConsumers(k, a.consumer, a.consumerIdleMs, a.dryRun), a.cursor, 0, {} }
  end
  -- (the read phase below may refuse: the epoch is recorded after it)
  local bySid, order, cursor, grouped = streamCandidates(k, a, not a.dryRun)
  if not a.dryRun then recordEpoch(k.meta, epoch) end
  local out = { redispatched = {}, failed = {}, dropped = 0, returned = {} }
  if a.dryRun then
    for _, sid in ipairs(order) do reclaimEntry(k, a, bySid[sid], now, out) end
  elseif grouped then
    -- the claims pass through XAUTOCLAIM (the server's idle time decides); every entry it can
    -- claim here was read above, so nothing below can refuse halfway
    cursor = a.cursor
    for _ = 1, RECLAIM_MAX_PAGES do
      local r = redis.call('XAUTOCLAIM', k.stream, GROUP, a.consumer, a.minIdle, cursor, 'COUNT', RECLAIM_PAGE)
      cursor = r[1]
      -- r[3]: pending ids whose entries were deleted; XAUTOCLAIM has already dropped them from the PEL
      out.dropped = out.dropped + (r[3] and #r[3] or 0)
      for _, e in ipairs(r[2]) do
        local c = bySid[e[1]]
        -- (never nil, see streamCandidates; were it, the entry would stay pending for a later call)
        if c then reclaimEntry(k, a, c, now, out) end
      end
      if cursor == '0-0' then break end
    end
  end
  local removed = removeStaleConsumers(k, a.consumer, a.consumerIdleMs, a.dryRun)
  return { 'ok', out.redispatched, out.failed, removed, cursor, out.dropped, out.returned }
end)

register('glidemq_reclaimStalledListJobs', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_reclaimStalledListJobs', args, RECLAIM_LIST_ARGS)
  requireTypes(k, RECLAIM_LIST_WRITES)
  if isPaused(k) then return { 'paused' } end
  if redis.call('EXISTS', k.meta) == 0 then return { 'ok', {}, {}, 'set', 0, {} } end
  local now = serverNow()
  -- time the server was down or not yet primary is no claim's lock age (lua/epoch.lua)
  local serving, epoch = servingFor(k.meta, now)
  if serving < a.minIdle then
    if not a.dryRun then recordEpoch(k.meta, epoch) end
    return { 'ok', {}, {}, 'set', 0, {} }
  end
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
  -- read phase: every candidate's hash, before any write
  local stalled, future = {}, {}
  for _, id in ipairs(ids) do
    local jk = jobKey(k, id)
    local f = jobFieldsOrNil(jk, 'state', 'src', 'lockedAt', 'stalledCount', 'grp', 'fence', 'ns')
    if f and isListClaim(f[1], f[2]) then
      local age, ahead = lockAge(f[3], now)
      if ahead then future[#future + 1] = jk end
      if age >= a.minIdle then
        if f[5] then groupRequireTypes(k, f[5]) end
        local stalls = stallsAfter(f[4])
        stalled[#stalled + 1] = { id = id, jk = jk, stalls = stalls, redispatch = stalls <= a.maxStalledCount,
          fence = toInt(f[6], 0) + 1, unstarted = unstarted(f[1], f[6], f[7]) }
      end
    end
  end
  if not a.dryRun then recordEpoch(k.meta, epoch) end
  local redispatched, failed, returned = {}, {}, {}
  for _, c in ipairs(stalled) do
    if c.unstarted then
      if not a.dryRun then
        listRelease(k, c.id)
        returnUnstarted(k, c.id, c.jk)
      end
      returned[#returned + 1] = c.id
    else
      local redispatch = c.redispatch
      if not a.dryRun then
        listRelease(k, c.id)
        redispatch = stallJob(k, c.id, c.jk, now, c.stalls, a.maxStalledCount, c.fence)
      end
      local into = redispatch and redispatched or failed
      into[#into + 1] = c.id
    end
  end
  if not a.dryRun then
    -- a future lockedAt starts to age from now (a stalled one was just released instead)
    for _, jk in ipairs(future) do
      if redis.call('HGET', jk, 'state') == 'active' then redis.call('HSET', jk, 'lockedAt', now) end
    end
  end
  return { 'ok', redispatched, failed, source, steps, returned }
end)
end
