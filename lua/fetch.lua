--[[ fetch.lua — glidemq_fetch, glidemq_activate

  glidemq_fetch: takes up to `count` jobs for a worker without blocking (priority, then LIFO,
  then stream). Used when a worker starts or a slot frees up outside a finish call.
    KEYS[1] meta key.  ARGV: consumer, now(ms), count (0: fetch nothing, recreate missing
            consumer groups).
    Returns {status, job1, job2, ...}: status 'ok' | 'paused' | 'limited' (the queue has a
            globalConcurrency limit: the worker takes jobs only through this function and
            glidemq_finish, which check the limit, and waits on events instead of a blocking
            XREADGROUP, whose deliveries would hold claims beyond the limit); each job is a claim
            reply: id, fence, name, data, ts, opts, then other fields as pairs (lua/activate.lua,
            claimJob). When paused, the second element is the id of the newest event (the worker
            blocks on what follows).

  glidemq_activate: activates what a blocking XREADGROUP delivered to `consumer` (that read
  cannot run inside a function). Stream entries become active claims; wake entries are acked
  and turned into priority/LIFO pops. While paused, or with no global slot free, delivered
  stream entries are handed back to the queue instead of being held.
    KEYS[1] meta key.  ARGV: consumer, now(ms), want (free slots of the worker), nStream, then
            nStream pairs (entryId, jobId), then the wake entry ids.
    Returns {status, job1, ...}: status 'ok' | 'paused' | 'limited' (the queue has a
            globalConcurrency limit; entries beyond the free slots were handed back at once, so
            a claim is never held while waiting for a slot). When paused, the second element is
            the id of the newest event, as for glidemq_fetch.
  Errors: none (leftover entries of removed jobs are acked and dropped).
]]
redis.register_function('glidemq_fetch', function(keys, args)
  local k = keysFor(keys[1])
  ensureQueue(k)
  if toInt(args[3], 1) <= 0 then
    -- count 0: a worker whose read found no consumer group (the stream was deleted or its group
    -- destroyed by hand) has both groups created again
    ensureGroup(k.stream)
    ensureGroup(k.wake)
  end
  if isPaused(k) then return { 'paused', lastEventId(k) } end
  local jobs = fetchNext(k, args[1], toInt(args[2], 0), toInt(args[3], 1))
  table.insert(jobs, 1, globalLimit(k) > 0 and 'limited' or 'ok')
  return jobs
end)

redis.register_function('glidemq_activate', function(keys, args)
  local k = keysFor(keys[1])
  local consumer, now, want, nStream = args[1], toInt(args[2], 0), toInt(args[3], 1), toInt(args[4], 0)
  local paused = isPaused(k)
  local out = { paused and 'paused' or (globalLimit(k) > 0 and 'limited' or 'ok') }
  if paused then out[2] = lastEventId(k) end
  -- the entries being activated are already in the pending list: they do not hold a slot yet
  local free = 0
  if not paused then free = math.min(freeSlots(k) + nStream, want) end
  for i = 0, nStream - 1 do
    local sid, id = args[5 + i * 2], args[6 + i * 2]
    if free > 0 then
      local job = activateEntry(k, sid, id, consumer, now)
      if job then
        out[#out + 1] = job
        free = free - 1
      end
    else
      handBack(k, sid, id)
    end
  end
  local nWake = 0
  for i = 5 + nStream * 2, #args do
    redis.call('XACK', k.wake, GROUP, args[i])
    redis.call('XDEL', k.wake, args[i])
    nWake = nWake + 1
  end
  while nWake > 0 and free > 0 do
    local job = popListJob(k, consumer, now)
    if not job then break end
    out[#out + 1] = job
    free = free - 1
    nWake = nWake - 1
  end
  return out
end)
