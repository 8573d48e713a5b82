--[[ schedulers.lua — glidemq_upsertScheduler, glidemq_removeScheduler, glidemq_fireSchedulers;
  shared local dueSchedulers (used by glidemq_upkeep).
  The `<base>:schedulers` hash has one field per scheduler name; the value is JSON written by the
  client (src/engine/schedulers.ts): pattern/tz or every, timing (a key that changes when the
  timing does), anchor (every), nextRun (ms), lastRun, lastJobId, createdAt, updatedAt, and job
  {name, data (JSON text), delay, priority, lifo, attempts, opts (JSON text)}. User content is only
  ever inside strings, so re-encoding the record here cannot alter it.
  Lua cannot compute cron times, so firing is split: the promotion tick lists what is due
  (dueSchedulers), the client computes each one's next slot after now, and glidemq_fireSchedulers
  adds the job and moves nextRun only if nextRun is still the value the client saw. That
  compare-and-set is what makes several workers fire one slot once, and a worker coming back after
  downtime fire a missed run once (the next slot it passes is after now).

  glidemq_upsertScheduler  KEYS[1] meta. ARGV: name, record(JSON), now(ms).
    An existing scheduler with the same timing keeps its nextRun/anchor/lastRun (an app that
    upserts at every start does not shift or re-fire its schedule); otherwise the record's own
    nextRun applies. Returns the stored record (JSON). Errors: ERR_INVALID (bad record).
  glidemq_removeScheduler  KEYS[1] meta. ARGV: name. Returns 1 if removed, 0 if there was none.
  glidemq_fireSchedulers   KEYS[1] meta. ARGV: now(ms), then triples (name, expectedNextRun, nextRun).
    Returns a flat list name, jobId ('' = not fired: gone, or another worker fired that slot).
    Errors: ERR_INVALID (a nextRun not after its expected slot); checked for all before any write.
]]
redis.register_function('glidemq_upsertScheduler', function(keys, args)
  local k = keysFor(keys[1])
  local name, now = args[1], toInt(args[3], 0)
  local rec = decodeSchedulerRecord(args[2] or '')
  if not name or name == '' then return fail('ERR_INVALID', 'a scheduler needs a name') end
  if not rec then return fail('ERR_INVALID', 'scheduler ' .. name .. ': the definition is not a valid scheduler record') end
  ensureQueue(k)
  local old = redis.call('HGET', k.schedulers, name)
  local prev = old and decodeSchedulerRecord(old)
  if prev then
    rec.createdAt = prev.createdAt or rec.createdAt
    rec.lastRun, rec.lastJobId = prev.lastRun, prev.lastJobId
    if prev.timing == rec.timing then rec.nextRun, rec.anchor = prev.nextRun, prev.anchor end
  end
  rec.name, rec.updatedAt = name, now
  local text = cjson.encode(rec)
  redis.call('HSET', k.schedulers, name, text)
  return text
end)

redis.register_function('glidemq_removeScheduler', function(keys, args)
  local k = keysFor(keys[1])
  return redis.call('HDEL', k.schedulers, args[1])
end)

redis.register_function('glidemq_fireSchedulers', function(keys, args)
  local k = keysFor(keys[1])
  local now = toInt(args[1], 0)
  for i = 2, #args, 3 do
    local expected, nextRun = tonumber(args[i + 1]), tonumber(args[i + 2])
    if not expected or not nextRun or nextRun <= expected then
      return fail('ERR_INVALID', 'scheduler ' .. tostring(args[i]) .. ': the next run must come after the slot being fired')
    end
  end
  local out = {}
  for i = 2, #args, 3 do
    local name, expected, nextRun = args[i], tonumber(args[i + 1]), tonumber(args[i + 2])
    local v = redis.call('HGET', k.schedulers, name)
    local rec = v and decodeSchedulerRecord(v)
    local fired = ''
    if rec and rec.nextRun == expected then
      local j = rec.job
      fired = nextJobId(k)
      insertJob(k, now, fired, j.name, j.data, toInt(j.delay, 0), toInt(j.priority, 0), j.lifo == '1',
        toInt(j.attempts, 1), j.opts or '')
      rec.lastRun, rec.lastJobId, rec.nextRun = expected, fired, nextRun
      redis.call('HSET', k.schedulers, name, cjson.encode(rec))
    end
    out[#out + 1] = name
    out[#out + 1] = fired
  end
  return out
end)
