--[[ upkeep.lua — glidemq_upkeep: the bounded housekeeping every worker's promotion tick runs.
  KEYS[1]  meta key.
  ARGV     now(ms).
  Returns  {metricsTrimmed, dedupRemoved}: metric minutes older than the retention window that
           went, and dedup entries that were over (expired, or their job finished / left delayed).
  Errors   none. Each part is bounded per call, so a large backlog is worked off over ticks.
]]
local UPKEEP_METRICS_BATCH = 200

redis.register_function('glidemq_upkeep', function(keys, args)
  local k = keysFor(keys[1])
  local now = toInt(args[1], 0)
  local trimmed = trimMetrics(k, now, UPKEEP_METRICS_BATCH)
  local swept = dedupSweep(k, now)
  return { trimmed, swept }
end)
