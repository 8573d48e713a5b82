--[[ upkeep.lua — glidemq_upkeep: the bounded housekeeping every worker's promotion tick runs.
  KEYS[1]  meta key.
  ARGV     none: every time it compares is the server's (TIME, read once per call).
  Returns  {metricsTrimmed, dedupRemoved, nextDueIn, now, outbox, journals, name1, record1, ...}:
           metric minutes older than the retention window that went; dedup entries that were over
           (expired, or their job finished / left delayed); how many ms from the server's now the
           earliest scheduler not yet due is due (-1: none; a relative time, so the caller waits
           for it on its own timer whatever its clock says); the server's now (ms), from which the
           caller computes the next slot of a due cron scheduler; how many flow outbox and
           dead-outbox records the queue holds (lua/flow-keys.lua, lua/dead-letters.lua: the caller
           relays those past their grace period); how
           many journals of flows stored in parts it holds (lua/flow-parts.lua: the caller rolls
           forward those past their grace period); and the schedulers due now, for the caller to
           fire (glidemq_fireSchedulers).
  Errors   ERR_INVALID (any argument), ERR_WRONG_TYPE (meta, dedup or a metrics key of another
           type; checked before the first write). Each part is bounded per call, so a large
           backlog is worked off over ticks.
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local UPKEEP_ARGS = {}
local UPKEEP_METRICS_BATCH = 200

register('glidemq_upkeep', function(keys, args)
  local k = keysFor(keys[1])
  decodeArgs('glidemq_upkeep', args, UPKEEP_ARGS)
  requireTypes(k, { 'meta', 'hash', 'dedup', 'hash', 'flowOutbox', 'hash', 'flowsDue', 'zset', 'deadOutbox', 'hash' })
  requireMetricsTypes(k)
  local now = serverNow()
  local due, nextDue = dueSchedulers(k, now) -- reads only, so before the writes
  local trimmed = trimMetrics(k, now, UPKEEP_METRICS_BATCH)
  local swept = dedupSweep(k, now)
  local out = { trimmed, swept, nextDue < 0 and -1 or math.max(0, nextDue - now), now, redis.call('HLEN', k.flowOutbox) + redis.call('HLEN', k.deadOutbox),
    redis.call('ZCARD', k.flowsDue) }
  for _, v in ipairs(due) do out[#out + 1] = v end
  return out
end)
end
