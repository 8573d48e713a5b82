--[[ upkeep.lua — glidemq_upkeep: the bounded housekeeping every worker's promotion tick runs.
  KEYS[1]  meta key.
  ARGV     now(ms).
  Returns  {metricsTrimmed, dedupRemoved, nextDue, name1, record1, name2, record2, ...}: metric
           minutes older than the retention window that went; dedup entries that were over
           (expired, or their job finished / left delayed); the earliest nextRun of the schedulers
           not yet due (-1: none); and the schedulers due now, for the client to fire
           (glidemq_fireSchedulers) once it has computed their next slots.
  Errors   none. Each part is bounded per call, so a large backlog is worked off over ticks.
]]
local UPKEEP_METRICS_BATCH = 200

redis.register_function('glidemq_upkeep', function(keys, args)
  local k = keysFor(keys[1])
  local now = toInt(args[1], 0)
  local trimmed = trimMetrics(k, now, UPKEEP_METRICS_BATCH)
  local swept = dedupSweep(k, now)
  local due, nextDue = dueSchedulers(k, now)
  local out = { trimmed, swept, nextDue }
  for _, v in ipairs(due) do out[#out + 1] = v end
  return out
end)
