--[[ fetch.lua — glidemq_fetch, glidemq_activate

  glidemq_fetch: takes up to `count` jobs for a worker without blocking (priority, then LIFO,
  then stream). Used when a worker starts or a slot frees up outside a finish call.
  KEYS[1]  meta key.
  ARGV[1]  consumer: the worker's consumer name (the claims' owner).
  ARGV[2]  count: jobs wanted (0..10000; 0: fetch nothing, recreate missing consumer groups).
  ARGV[3]  lockMs: the worker's lockDuration in ms, recorded with each claim (its terms,
           lua/activate.lua): stalled recovery judges the claim by it.
  ARGV[4]  maxStalledCount: the worker's maxStalledCount, recorded with each claim the same way.
  Returns  {status, job1, job2, ...}: status 'ok' | 'paused' | 'limited' (the queue has a
           globalConcurrency limit or a rate limiter: the worker takes jobs only through this
           function and glidemq_finish, which check them, and waits on events instead of a
           blocking XREADGROUP, whose deliveries would hold claims beyond the limit) | 'rated'
           (the rate limiter or a hold, lua/rate-window.lua, let fewer jobs start than `count`:
           the second element is the ms from the server's now until one may start, the jobs
           follow it); each job is a claim reply: id, fence, name, data, ts, opts, then other
           fields as pairs (lua/activate.lua, claimJob). When paused, the second element is the
           id of the newest event (the worker blocks on what follows). processedOn and lockedAt
           are the server's time.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).
           Leftover entries of removed jobs are acked and dropped.

  glidemq_activate: activates what a blocking XREADGROUP delivered to `consumer` (that read
  cannot run inside a function). Stream entries become active claims; wake entries are acked
  and turned into priority/LIFO/group pops. While paused, or with no global slot free or no
  start left in the rate window, delivered stream entries are handed back to the queue ahead of
  the stream, in their order (the LIFO list's tail, where the worker's fetch after the wait finds
  them: they keep their place, as BullMQ's rate-limited jobs do) instead of being held.
  KEYS[1]  meta key.
  ARGV[1]  consumer: the worker's consumer name (the read was made as it).
  ARGV[2]  want: free slots of the worker (0..10000): at most this many claims are made.
  ARGV[3]  lockMs: the worker's lockDuration in ms, recorded with each claim (as for glidemq_fetch).
  ARGV[4]  maxStalledCount: the worker's maxStalledCount, recorded with each claim.
  ARGV[5]  wakeIds: the wake stream entry ids delivered, joined by ',' ('' for none).
  ARGV[6]  nStream: the number of job stream entries delivered (0..10000); `nStream` groups of 2
           arguments follow, one per entry, each:
    group.entryId: the job stream entry id.
    group.jobId: the entry's id field as delivered (an entry of a removed or foreign job, or one
           without the field: '', is acked and dropped).
  Returns  {status, job1, ...}: status 'ok' | 'paused' | 'limited' (the queue has a
           globalConcurrency limit or a rate limiter; entries beyond the free slots were handed
           back at once, so a claim is never held while waiting for a slot) | 'rated' (as for
           glidemq_fetch: fewer than `want` could start; the second element is the ms until one
           may, the jobs follow). When paused, the second element is the id of the newest event,
           as for glidemq_fetch.
  Errors   ERR_INVALID (an argument, or nStream not matching the entries sent), ERR_WRONG_TYPE.
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
local FETCH_ARGS = { 'consumer', ARG.nonEmpty, 'count', ARG.count, 'lockMs', ARG.ms, 'maxStalledCount', ARG.int(0, 1000000000) }
local FETCH_GROUPS = { 'stream', 'stream', 'wake', 'stream' } -- ensureQueue/ensureGroup create these
local ACTIVATE_HEAD = { 'consumer', ARG.nonEmpty, 'want', ARG.count, 'lockMs', ARG.ms,
  'maxStalledCount', ARG.int(0, 1000000000), 'wakeIds', ARG.streamIds, 'nStream', ARG.count }
local ACTIVATE_ENTRY = { 'entryId', ARG.streamId, 'jobId', ARG.any }

register('glidemq_fetch', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_fetch', args, FETCH_ARGS)
  -- check phase: reads (a key of another type raises here, before any write) and key types
  -- (eventsUntil: whether a claim writes 'active', lua/activate.lua listening; read here, not
  -- once more per claim)
  local m = redis.call('HMGET', k.meta, unpack(RATE.META))
  local since = m[1] == '1' and lastEventId(k)
  requireTypes(k, FETCH_GROUPS)
  local lists = checkFetch(k, a.count, m, false)
  ensureQueue(k)
  if a.count == 0 then
    -- count 0: a worker whose read found no consumer group (the stream was deleted or its group
    -- destroyed by hand) has both groups created again
    ensureGroup(k.stream)
    ensureGroup(k.wake)
  end
  if since then return { 'paused', since } end
  local now = serverNow()
  listening(k, now, m)
  claimTerms(k, a.lockMs, a.maxStalledCount, m)
  local jobs, _, wait = fetchNext(k, a.consumer, now, a.count, m, lists)
  if wait > 0 then
    table.insert(jobs, 1, wait)
    table.insert(jobs, 1, 'rated')
  else
    table.insert(jobs, 1, (toInt(m[2], 0) > 0 or RATE.limited(m)) and 'limited' or 'ok')
  end
  return jobs
end)

register('glidemq_activate', function(keys, args)
  local k = keysFor(keys[1])
  local a, entries = decodeArgs('glidemq_activate', args, ACTIVATE_HEAD, ACTIVATE_ENTRY, 'nStream')
  local consumer, wakeIds = a.consumer, a.wakeIds
  -- check phase: reads, then the types of the keys the writes below touch
  local m = redis.call('HMGET', k.meta, unpack(RATE.META))
  local paused = m[1] == '1'
  local out = { paused and 'paused' or ((toInt(m[2], 0) > 0 or RATE.limited(m)) and 'limited' or 'ok') }
  if paused then out[2] = lastEventId(k) end
  local now = serverNow()
  if m[4] then requireTypes(k, RATE.TYPES) end -- the starts are logged (RATE.record)
  -- the entries being activated are already in the pending list: they do not hold a slot yet
  -- (so they are taken off the count before it is compared with the limit, not added to what is
  -- left after it: at the limit, 0 slots + 1 delivered entry would let one more job run)
  local free, room = 0, 0
  if not paused then
    local limit = globalLimit(k)
    if limit <= 0 then free = a.want
    else free = math.max(0, math.min(limit - (activeCount(k) - #entries), a.want)) end
    room = RATE.room(k, now, m)
    if room < free then free = room end
  end
  if #entries > 0 then requireTypes(k, STREAM_TYPES) end
  -- wake acks, then list pops; entries handed back go to the LIFO list
  if #wakeIds > 0 or #entries > free then requireTypes(k, LIST_TYPES) end
  listening(k, now, m) -- kept for the claims below (lua/activate.lua)
  claimTerms(k, a.lockMs, a.maxStalledCount, m)
  local handedBack = false
  for _, e in ipairs(entries) do
    if free > 0 then
      local job = activateEntry(k, e.entryId, e.jobId, consumer, now)
      if job then
        out[#out + 1] = job
        free = free - 1
      end
    else
      handBack(k, e.entryId, e.jobId)
      handedBack = true
    end
  end
  -- a worker blocked on the stream reads the wake stream too: it finds them in the LIFO list
  if handedBack then wakeWorkers(k) end
  for _, wid in ipairs(wakeIds) do
    redis.call('XACK', k.wake, GROUP, wid)
    redis.call('XDEL', k.wake, wid)
  end
  local nWake = #wakeIds
  while nWake > 0 and free > 0 do
    local job = popListJob(k, consumer, now)
    if not job then break end
    out[#out + 1] = job
    free = free - 1
    nWake = nWake - 1
  end
  if paused then return out end
  local claimed = #out - 1
  if m[4] then RATE.record(k, now, m, out, 2) end
  -- the rate window is full (or held) and the worker had room for more: it waits, then fetches
  -- (the entries handed back above are in the LIFO list, ahead of the stream, for that fetch)
  if room <= claimed and claimed < a.want then
    local _, wait = RATE.room(k, now, m)
    if wait > 0 then
      out[1] = wait
      table.insert(out, 1, 'rated')
    end
  end
  return out
end)
end
