--[[ reclaim.lua — glidemq_reclaimStalled, glidemq_reclaimStalledListJobs
  Stalled recovery, as each worker's scheduler runs it every stalledInterval (and `glidemq reclaim`).
  A claim is judged by its own terms: the lock duration and maxStalledCount of the worker it was
  made for, recorded with it (hash field `terms`, lua/activate.lua), never by the settings of the
  worker that runs the check. Only a claim with nothing recorded (made by an older glidemq, or a
  delivered stream entry that was never activated) is judged by the caller's minIdle and
  maxStalledCount. A claim is stalled when its idle time reaches its lock; it then counts a stall
  (stalledCount + 1) and the job is redispatched while stalledCount <= its maxStalledCount, else
  failed for good with the reason `job stalled more than maxStalledCount`, exactly as a processor's
  failure is stored (lua/outcomes.lua storeFailure: the job's removeOnFail, or the caller's
  keepFailed when it names none; the 'failed' event; the failed metrics of the minute).
  Redispatch leaves the job waiting with no owner: the old worker's fence no longer matches, so
  its late finish/progress/heartbeat is a visible no-op ('stale').
  A job whose hash is gone (removed) is never re-created: what still names it is dropped. A job
  key another program overwrote with another type is treated the same way and never written.
  Neither function does anything while the queue is paused. With dryRun '1' nothing is written:
  the replies list what would be redispatched and failed.
  Time: every age is the server's. Stream claims' idle times are the pending entries list's
  (kept by the server); list claims' ages are the server's TIME minus `lockedAt`, which the claim
  and heartbeat paths write from the server's TIME too. No caller's clock decides a reclaim. An
  age counts only from the server's epoch (its start, or its promotion: lua/epoch.lua): until the
  server has served for a claim's lock that claim is not stalled, so an outage or a failover
  shorter than the lock never takes a live worker's job (each function records the epoch in meta,
  epochId and epochAt, unless it is a dry run).
  A claim still marked not started (`ns` holds its fence: a worker's prefetch no processor took
  yet, lua/activate.lua) is given back, once its lock ran out, without a stall: its stalledCount
  stays, the attempt is marked `nsr` (its next claims are not marked, so it gets this once), no
  'stalled' event is written, and its id is listed under `returned` instead.
  Both functions read everything they decide on (pending entries, job hashes) before the first
  write, and check the type of every queue key they may write, so a refused call writes nothing.

  glidemq_reclaimStalled — the job stream's pending entries list.
    KEYS[1]  meta key.
    ARGV[1]  consumer: the calling worker's consumer; never deleted as a stale consumer.
    ARGV[2]  minIdle: ms; the lock of a claim with no terms recorded (the caller's lockDuration),
             and how long an entry that is no claim (of a removed job, or superseded) stays pending.
    ARGV[3]  maxStalledCount: the stalls a claim with no terms recorded may have and still be
             redispatched (whole number >= 0).
    ARGV[4]  consumerIdleMs: stale-consumer threshold in ms (see consumer-cleanup.lua).
    ARGV[5]  dryRun: '1' changes nothing and reports what would be done, '0' reclaims.
    ARGV[6]  cursor: where the walk resumes: the previous call's nextCursor ('0-0' for the start).
    ARGV[7]  keepFailed: the retention rule of a job failed here that names no removeOnFail
             itself (the caller's removeOnFail, as lua/finish.lua takes it: '' keeps it).
    Returns  {'paused'} or {'ok', {redispatched ids}, {failed ids}, consumersRemoved, nextCursor,
             dropped, {returned ids}, {failed jobs}}: at most RECLAIM_MAX_PAGES pages of RECLAIM_PAGE pending
             entries are looked at per call, those idle at least the queue's lockFloor (the
             shortest lock any claim was made with, lua/activate.lua) or minIdle if that is
             shorter (XPENDING IDLE: entries idle less than every lock are not read). Each entry
             is decided by itself: a claim whose idle time reached its own lock is acked and
             deleted, and its job redispatched or failed; an entry that is no claim is acked and
             deleted once idle minIdle; any other entry stays as it is. (No XCLAIM: the entries
             are acked in the same call that read them, so none is handed to another consumer
             first.) nextCursor is the last entry looked at, '0-0' when the walk wrapped: the next
             call resumes after it. dropped counts the entries of removed jobs and superseded
             entries that were acked and deleted. failed jobs: per failed id, in the same order,
             its hash as a flat field/value list read before the failure (HGETALL: the job as it
             ran, for the 'failed' event of the worker that checks; empty in a dry run).
    A delivered entry that was never activated (state still waiting with that entry id: a worker
    died between its read and its activation) is an un-activated claim and counts a stall too.

  glidemq_reclaimStalledListJobs — claimed priority/LIFO/group jobs (no pending entry).
    KEYS[1]  meta key.
    ARGV[1]  minIdle: ms; the lock of a claim with no terms recorded: a claim whose lock age
             (server TIME - lockedAt) reaches its lock is stalled.
    ARGV[2]  maxStalledCount: the stalls a claim with no terms recorded may have and still be
             redispatched (whole number >= 0).
    ARGV[3]  dryRun: '1' changes nothing and reports what would be done, '0' reclaims.
    ARGV[4]  keepFailed: the retention rule of a job failed here that names no removeOnFail
             itself (as for glidemq_reclaimStalled).
    Candidates come from the list-active-ids set while it is trusted (see list-active.lua); else
    from the set plus a bounded SCAN over job hashes (at most LIST_RECLAIM_MAX_STEPS steps per call,
    from cursor 0), so on a very large keyspace a stalled claim past that bound can stay unfound
    until healListActive has re-seeded the set.
    A lockedAt in the future (written by a client of an older library from its own clock, or seen
    after a failover to a server whose clock is behind) counts as age 0, and (not in a dry run) is
    set to the server's TIME: the claim is then reclaimed one lock later unless its worker heartbeats.
    So a skewed clock can neither get a live claim reclaimed nor make a dead one immune forever.
    Returns  {'paused'} or {'ok', {redispatched ids}, {failed ids}, source ('set'|'scan'), scanSteps,
             {returned ids}, {failed jobs}} (failed jobs as for glidemq_reclaimStalled).

  Errors   ERR_INVALID (an argument, named), ERR_WRONG_TYPE (a key it writes holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local STALLED_REASON = 'job stalled more than maxStalledCount'
local RECLAIM_PAGE = 100
local RECLAIM_MAX_PAGES = 10
local LIST_RECLAIM_MAX_STEPS = 1000

local RECLAIM_ARGS = { 'consumer', ARG.nonEmpty, 'minIdle', ARG.ms, 'maxStalledCount', ARG.int(0, 1000000000),
  'consumerIdleMs', ARG.ms, 'dryRun', ARG.flag, 'cursor', ARG.streamId, 'keepFailed', KEEP_RULE }
local RECLAIM_LIST_ARGS = { 'minIdle', ARG.ms, 'maxStalledCount', ARG.int(0, 1000000000), 'dryRun', ARG.flag,
  'keepFailed', KEEP_RULE }
-- What a stall writes: the job stream (ack, delete, re-add), the failed set and events, and where
-- requeue puts a job (prioritized, lifo, wake, meta's sequences, the group sets); list claims also
-- release list-active-ids / list-active.
local RECLAIM_WRITES = { 'meta', 'hash', 'stream', 'stream', 'wake', 'stream', 'events', 'stream', 'failed', 'zset',
  'prioritized', 'zset', 'lifo', 'list', 'readyGroups', 'zset', 'timedGroups', 'zset', 'removedFinishes', 'hash' }
local RECLAIM_LIST_WRITES = { 'meta', 'hash', 'stream', 'stream', 'wake', 'stream', 'events', 'stream', 'failed', 'zset',
  'prioritized', 'zset', 'lifo', 'list', 'readyGroups', 'zset', 'timedGroups', 'zset', 'listActiveIds', 'set',
  'listActive', 'string' }
-- The job fields a check reads for each claim it looks at (positions as stallPlan reads them).
local CLAIM_FIELDS = { 'state', 'src', 'stalledCount', 'grp', 'fence', 'ns', 'terms', 'attemptsMade', 'lockedAt', 'sid' }

-- The lock (ms) and maxStalledCount a claim was made under, from its `terms` field ('<lock>:<max>',
-- or with the plain mark, lua/activate.lua), or the caller's `a.minIdle` and `a.maxStalledCount`
-- when it has none.
local function termsOf(text, a)
  local lock, max = string.match(text or '', '^(%d+):(%d+)$')
  if not lock then lock, max = string.match(text or '', PLAIN.match) end
  if lock then return tonumber(lock), tonumber(max) end
  return a.minIdle, a.maxStalledCount
end

-- The shortest lock a claim of the queue may have: the queue's lockFloor (lua/activate.lua) or the
-- caller's minIdle (claims with no terms), whichever is shorter. Nothing is stalled before it.
local function shortestLock(k, a)
  local floor = tonumber(redis.call('HGET', k.meta, 'lockFloor'))
  if floor and floor < a.minIdle then return floor end
  return a.minIdle
end

-- A job's stalledCount after one more stall (a field that is no whole number >= 0 counts as 0).
local function stallsAfter(field)
  local n = tonumber(field)
  if not n or n ~= n or n < 0 or n > 1000000000 then n = 0 end
  return math.floor(n) + 1
end

-- Whether job fields `state`, `fence` and `ns` are those of a claim marked not started.
local function unstarted(state, fence, ns)
  return state == 'active' and ns ~= nil and ns ~= false and ns == fence
end

--[[ The read phase for one claim of job `id` (hash `jk`), whose CLAIM_FIELDS are `f`, idle `idle`
  ms (already capped at the server's serving time): nil while it is within its lock (or its own
  terms do not apply: `judged` false, a delivered entry never activated, takes the caller's), else
  what the write phase does with it: { id, jk, stalls, redispatch, fence, unstarted, keep, made }.
  The keys a redispatch of a group job writes, and the metrics a failure writes, are checked here. ]]
local function stallPlan(k, a, id, jk, f, idle, now, judged)
  local lock, maxStalled = a.minIdle, a.maxStalledCount
  if judged then lock, maxStalled = termsOf(f[7], a) end
  if idle < lock then return nil end
  local c = { id = id, jk = jk, stalls = stallsAfter(f[3]), fence = toInt(f[5], 0) + 1,
    unstarted = unstarted(f[1], f[5], f[6]) }
  c.redispatch = c.stalls <= maxStalled
  if c.unstarted or c.redispatch then
    if f[4] then groupRequireTypes(k, f[4]) end
  else
    -- failed for good, as a processor's failure is (lua/outcomes.lua): its own removeOnFail
    local more = redis.call('HMGET', jk, 'opts', 'parents')
    c.keep = keepRuleFor(more[1], a.keepFailed)
    c.made = toInt(f[8], 0)
    FAILURE_TYPES.dead.target(k) -- a dead-letter queue's keys (lua/dead-letters.lua), checked before the first write
    -- a child settles its parents as its failure policy says (lua/flow-keys.lua); a record for a
    -- parent in another queue is relayed by maintenance
    local kind = more[2] and FLOW.failureKind(more[1])
    if kind then
      FLOW.checkParents(k, more[2], kind)
      c.flow = { parents = more[2], kind = kind }
    end
    if not a.dryRun then
      checkMetrics(k, now, false, true)
      -- the job as it was, for the checking worker's 'failed' event (retention may delete it)
      c.fields = redis.call('HGETALL', jk)
    end
  end
  return c
end

-- Counts a stall for a job already taken out of active delivery state (`c`, from stallPlan: its
-- stalledCount with this stall is set, not HINCRBY'd, which a non-integer field would refuse
-- halfway), then redispatches it or fails it for good. Returns true when redispatched. A job
-- failed here gets the next fence (`c.fence`): a finish of the stalled claim that arrives later
-- must not look like the repeat of a finish that stored this outcome (lua/finish.lua).
local function stallJob(k, c, now)
  redis.call('HSET', c.jk, 'stalledCount', c.stalls)
  redis.call('HDEL', c.jk, 'owner', 'lockedAt', 'src', 'sid')
  emit(k, 'stalled', c.id, 'stalledCount', c.stalls)
  if c.redispatch then
    requeue(k, c.id, c.jk)
    return true
  end
  redis.call('HSET', c.jk, 'fence', c.fence)
  storeFailure(k, c.jk, c.id, c.keep, now, c.made, STALLED_REASON, listening(k, now))
  if c.flow then FLOW.settleParents(k, c.jk, c.flow.parents, c.flow.kind, STALLED_REASON, now) end
  return false
end

-- Gives back a claim that no processor took (see the header): requeued with its stalledCount as it
-- was, this attempt marked as given back once.
local function returnUnstarted(k, id, jk)
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src', 'sid', 'ns')
  redis.call('HSET', jk, 'nsr', '1')
  requeue(k, id, jk)
end

-- The write phase for one stalled claim `c` (not in a dry run): given back, redispatched or failed.
-- Lists its id in `out` (returned, redispatched or failed). Returns true for a failure for good.
local function reclaimClaim(k, a, c, now, out)
  if c.unstarted then
    if not a.dryRun then returnUnstarted(k, c.id, c.jk) end
    out.returned[#out.returned + 1] = c.id
    return false
  end
  local redispatch = c.redispatch
  if not a.dryRun then redispatch = stallJob(k, c, now) end
  local into = redispatch and out.redispatched or out.failed
  into[#into + 1] = c.id
  if c.fields then out.failedJobs[#out.failedJobs + 1] = c.fields end
  return not redispatch
end

--[[ Read phase of the stream walk: from `a.cursor`, at most RECLAIM_MAX_PAGES pages of pending
  entries idle at least `floor` (shortestLock), each decided by itself (stallPlan; an entry that is
  no claim once idle minIdle). Returns the entries to take, in order, each { sid, claim (stallPlan's,
  or nil for an entry that is only dropped) }; the cursor after them ('0-0' when the walk wrapped);
  and false when the stream has no group. `serving`: the ms since the server's epoch, which caps
  every idle time. ]]
local function streamCandidates(k, a, floor, serving, now)
  local taken, cursor = {}, a.cursor
  for page = 1, RECLAIM_MAX_PAGES do
    local start = (page == 1 and cursor == '0-0') and '-' or ('(' .. cursor)
    local pend = callUnless('NOGROUP', 'XPENDING', k.stream, GROUP, 'IDLE', floor, start, '+', RECLAIM_PAGE)
    if not pend then return taken, '0-0', false end
    for _, p in ipairs(pend) do
      local sid, idle = p[1], math.min(p[3], serving)
      local id = streamEntryJobId(k, sid)
      local f = id and jobFieldsOrNil(jobKey(k, id), unpack(CLAIM_FIELDS))
      -- a claim: the job's current entry, delivered (waiting) or activated from the stream;
      -- anything else is a removed job or an entry a redispatch or hand-back already superseded
      if f and f[10] == sid and (f[1] == 'waiting' or (f[1] == 'active' and f[2] == 's')) then
        -- a delivered entry never activated carries no terms of this claim: the caller's apply
        local c = stallPlan(k, a, id, jobKey(k, id), f, idle, now, f[1] == 'active')
        if c then taken[#taken + 1] = { sid = sid, claim = c } end
      elseif idle >= a.minIdle then
        taken[#taken + 1] = { sid = sid }
      end
    end
    if #pend < RECLAIM_PAGE then return taken, '0-0', true end
    cursor = pend[#pend][1]
  end
  return taken, cursor, true
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
  local floor = shortestLock(k, a)
  if serving < floor then
    if not a.dryRun then recordEpoch(k.meta, epoch) end
    return { 'ok', {}, {}, removeStaleConsumers(k, a.consumer, a.consumerIdleMs, a.dryRun), a.cursor, 0, {} }
  end
  -- (the read phase below may refuse: the epoch is recorded after it)
  local taken, cursor = streamCandidates(k, a, floor, serving, now)
  if not a.dryRun then recordEpoch(k.meta, epoch) end
  local out = { redispatched = {}, failed = {}, dropped = 0, returned = {}, failedJobs = {} }
  local failures = 0
  for _, e in ipairs(taken) do
    if not a.dryRun then
      redis.call('XACK', k.stream, GROUP, e.sid)
      redis.call('XDEL', k.stream, e.sid)
    end
    if e.claim then
      if reclaimClaim(k, a, e.claim, now, out) then failures = failures + 1 end
    else
      out.dropped = out.dropped + 1
    end
  end
  -- a stalled attempt reported no processing time
  if failures > 0 and not a.dryRun then recordMetrics(k, now, false, 0, failures) end
  local removed = removeStaleConsumers(k, a.consumer, a.consumerIdleMs, a.dryRun)
  return { 'ok', out.redispatched, out.failed, removed, cursor, out.dropped, out.returned, out.failedJobs }
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
  if serving < shortestLock(k, a) then
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
    local f = jobFieldsOrNil(jk, unpack(CLAIM_FIELDS))
    if f and isListClaim(f[1], f[2]) then
      local age, ahead = lockAge(f[9], now)
      if ahead then future[#future + 1] = jk end
      local c = stallPlan(k, a, id, jk, f, math.min(age, serving), now, true)
      if c then stalled[#stalled + 1] = c end
    end
  end
  if not a.dryRun then recordEpoch(k.meta, epoch) end
  local out = { redispatched = {}, failed = {}, returned = {}, failedJobs = {} }
  local failures = 0
  for _, c in ipairs(stalled) do
    if not a.dryRun then listRelease(k, c.id) end
    if reclaimClaim(k, a, c, now, out) then failures = failures + 1 end
  end
  if failures > 0 and not a.dryRun then recordMetrics(k, now, false, 0, failures) end
  if not a.dryRun then
    -- a future lockedAt starts to age from now (a stalled one was just released instead)
    for _, jk in ipairs(future) do
      if redis.call('HGET', jk, 'state') == 'active' then redis.call('HSET', jk, 'lockedAt', now) end
    end
  end
  return { 'ok', out.redispatched, out.failed, source, steps, out.returned, out.failedJobs }
end)
end
