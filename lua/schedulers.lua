--[[ schedulers.lua — glidemq_upsertScheduler, glidemq_removeScheduler, glidemq_fireSchedulers.
  The `<base>:schedulers` hash has one field per scheduler name; the value is a JSON record:
  pattern/tz or every, timing (a key that changes when the timing does), anchor (every), nextRun
  (ms), lastRun, lastJobId, createdAt, updatedAt, startDate (optional: an interval's first run is
  at startDate, or now if that has passed, instead of one interval after now; 0 = now), and job
  {name, data (JSON text), delay, priority, lifo, attempts, opts (JSON text)}. The client builds
  the record (src/engine/scheduling/schedulers.ts); these functions keep only the known fields, each
  checked (lua/scheduler-records.lua), so a record they store can always be read back and fired.
  User content is only ever inside strings.
  Time: every time in a record is the server's. The server decides when a scheduler is due and
  fires it only then; an interval's next run is computed here from the server's TIME (the first
  anchor + k * every after now). Lua cannot compute cron times, so for a cron pattern the client
  computes the next slot after the server's time (glidemq_upkeep returns it; upsert uses TIME)
  and the server accepts it only if it lies after its own now. Firing is split: the promotion
  tick lists what is due (glidemq_upkeep), and glidemq_fireSchedulers adds the job and moves
  nextRun only if nextRun is still the value the client saw. That compare-and-set is what makes
  several workers fire one slot once, and a worker coming back after downtime fire a missed run
  once (the next slot is after now, not after the missed one).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals

--[[ glidemq_upsertScheduler — adds or replaces a scheduler.
  KEYS[1]  meta key.
  ARGV[1]  name: the scheduler's name (1..256 bytes).
  ARGV[2]  record: the scheduler record (JSON object, see above). createdAt, updatedAt, anchor and
           an interval's nextRun are set here from the server's time, whatever the record says (from
           its startDate when it has one); a cron record's nextRun is the client's (its next slot
           after the server's TIME, or that TIME itself for a first run at once).
  Returns  the stored record (JSON). An existing scheduler with the same timing keeps its
           nextRun/anchor (an app that upserts at every start does not shift or re-fire its
           schedule), and its createdAt, lastRun and lastJobId in any case.
  Errors   ERR_INVALID (name, or the record: the message names the field), ERR_WRONG_TYPE.
]]
local UPSERT_SCHEDULER_ARGS = { 'name', ARG.nonEmpty, 'record', ARG.jsonObject }

register('glidemq_upsertScheduler', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_upsertScheduler', args, UPSERT_SCHEDULER_ARGS)
  local rec, why = decodeSchedulerRecord(a.record)
  if not rec then refuse('ERR_INVALID', 'glidemq_upsertScheduler: scheduler ' .. a.name .. ': record: ' .. why) end
  requireTypes(k, { 'schedulers', 'hash', 'meta', 'hash', 'stream', 'stream', 'wake', 'stream' })
  local old = redis.call('HGET', k.schedulers, a.name)
  local prev = old and decodeSchedulerRecord(old)
  local now = serverNow()
  rec.name, rec.createdAt, rec.updatedAt, rec.anchor = a.name, now, now, nil
  rec.lastRun, rec.lastJobId = nil, nil
  if rec.every then
    if rec.startDate then
      local start = math.max(now, rec.startDate)
      rec.anchor, rec.nextRun = start, start
    else
      rec.anchor, rec.nextRun = now, now + rec.every
    end
  end
  if prev then
    rec.createdAt = prev.createdAt or now
    rec.lastRun, rec.lastJobId = prev.lastRun, prev.lastJobId
    if prev.timing == rec.timing then rec.nextRun, rec.anchor = prev.nextRun, prev.anchor end
  end
  ensureQueue(k)
  local text = cjson.encode(rec)
  redis.call('HSET', k.schedulers, a.name, text)
  return text
end)

--[[ glidemq_removeScheduler — removes a scheduler (jobs it added stay).
  KEYS[1]  meta key.
  ARGV[1]  name: the scheduler's name (1..256 bytes).
  Returns  1 if removed, 0 if there was none.
  Errors   ERR_INVALID (name), ERR_WRONG_TYPE.
]]
local REMOVE_SCHEDULER_ARGS = { 'name', ARG.nonEmpty }

register('glidemq_removeScheduler', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_removeScheduler', args, REMOVE_SCHEDULER_ARGS)
  requireTypes(k, { 'schedulers', 'hash' })
  return redis.call('HDEL', k.schedulers, a.name)
end)

--[[ glidemq_fireSchedulers — fires due schedulers: adds each one's job and moves its nextRun.
  KEYS[1]  meta key.
  ARGV[1..]  groups of 3 arguments, one per scheduler, to the end of ARGV:
    group.name: the scheduler's name (1..256 bytes).
    group.expectedNextRun: the nextRun the caller saw (glidemq_upkeep listed it as due).
    group.nextRun: a cron scheduler's next slot after the server's now (computed by the client
           from the `now` glidemq_upkeep returned); 0 for an interval scheduler, whose next slot
           the server computes.
  A fired job's id comes from the queue's counter, moved on first on a new server epoch as
  glidemq_add's (lua/jobs.lua guardIdCounter).
  A scheduler fires only if its record is still there and readable, its nextRun still equals
  expectedNextRun (else another worker fired that slot, or it was upserted), that nextRun is not
  after the server's now (it is due), and its next slot lies after the server's now: a cron
  nextRun that is not (a client that computed it from a clock behind the server's, or a slot
  that passed between the two calls) is refused, the scheduler stays due, and the next tick
  computes the slot again. The record then gets lastRun = expectedNextRun, lastJobId and the
  next slot.
  Returns  a flat list name, jobId, nextRunIn per group: jobId '' = not fired; nextRunIn the ms
           from the server's now to the scheduler's nextRun after the call (0: due now; -1: gone).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE; checked for all groups before any write.
]]
local FIRE_SCHEDULERS_HEAD = {}
local FIRE_SCHEDULERS_EACH = { 'name', ARG.nonEmpty, 'expectedNextRun', ARG.ms, 'nextRun', ARG.ms }

register('glidemq_fireSchedulers', function(keys, args)
  local k = keysFor(keys[1])
  local _, groups = decodeArgs('glidemq_fireSchedulers', args, FIRE_SCHEDULERS_HEAD, FIRE_SCHEDULERS_EACH)
  requireTypes(k, { 'schedulers', 'hash' })
  requireTypes(k, INSERT_JOB_WRITES)
  local now = serverNow()
  -- Read and decide for every group before the first write.
  local recs, nexts = {}, {}
  for i, g in ipairs(groups) do
    local v = redis.call('HGET', k.schedulers, g.name)
    local rec = v and decodeSchedulerRecord(v)
    if rec and rec.nextRun == g.expectedNextRun and rec.nextRun <= now then
      local nextRun = rec.every and schedulerSlotAfter(rec, now) or g.nextRun
      if nextRun > now then recs[i], nexts[i] = rec, nextRun end
    end
  end
  local out, done = {}, {}
  if next(recs) then guardIdCounter(k) end
  for i, g in ipairs(groups) do
    local rec, fired = recs[i], ''
    if rec and not done[g.name] then -- (a name sent twice fires once)
      done[g.name] = true
      local j = rec.job
      fired = nextJobId(k)
      insertJob(k, now, fired, j.name, j.data, j.delay, j.priority, j.lifo == '1', j.attempts, j.opts)
      rec.lastRun, rec.lastJobId, rec.nextRun = g.expectedNextRun, fired, nexts[i]
      redis.call('HSET', k.schedulers, g.name, cjson.encode(rec))
    end
    out[#out + 1] = g.name
    out[#out + 1] = fired
    if fired == '' then
      local v = redis.call('HGET', k.schedulers, g.name)
      local at = v and schedulerNextRun(v)
      out[#out + 1] = at and math.max(0, at - now) or -1
    else
      out[#out + 1] = nexts[i] - now
    end
  end
  return out
end)
end
