--[[ upkeep.lua — glidemq_upkeep: the bounded housekeeping every worker's promotion tick runs.
  KEYS[1]  meta key.
  ARGV     now(ms).
  Returns  {metricsTrimmed}: how many metric minutes older than the retention window went.
  Errors   none. Each part is bounded per call, so a large backlog is worked off over ticks.
]]
local UPKEEP_METRICS_BATCH = 200

redis.register_function('glidemq_upkeep', function(keys, args)
  local k = keysFor(keys[1])
  local now = toInt(args[1], 0)
  local trimmed = trimMetrics(k, now, UPKEEP_METRICS_BATCH)
  return { trimmed }
end)
