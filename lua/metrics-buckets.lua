--[[ metrics-buckets.lua — the per-minute counters (no registered functions here): checkMetrics and
  recordMetrics (used by lua/finish.lua and lua/reclaim.lua: every finished attempt, a stalled
  failure too, is counted), trimMetrics (lua/upkeep.lua) and requireMetricsTypes (both). The key
  layout and retention are described in lua/metrics.lua. `now` is always the server's time: the
  caller's serverNow(), never a time a client sent.
]]
local METRICS_RETENTION_MINUTES = 1440
-- Defined in the block below, whose other locals stay inside it (the main chunk may hold at most 200).
local metricsKeys, requireMetricsTypes, trimMetrics, recordMetrics, checkMetrics
do
local METRICS_TRIM_BATCH = 500
local METRICS_KEY_TTL_MS = (METRICS_RETENTION_MINUTES + 1) * 60000

-- Built once per call and kept on the call's key table: a finish checks and then records them.
metricsKeys = function(k)
  local mk = rawget(k, 'metricsKeys')
  if mk then return mk end
  local m = k.base .. ':metrics:'
  mk = { completed = m .. 'completed', failed = m .. 'failed', time = m .. 'time', minutes = m .. 'minutes' }
  rawset(k, 'metricsKeys', mk)
  return mk
end

-- Raises unless every metrics key is absent or of the type glidemq keeps there: a function that
-- records or trims metrics calls it before its first write.
requireMetricsTypes = function(k)
  local m = metricsKeys(k)
  requireKeyType(m.completed, 'hash')
  requireKeyType(m.failed, 'hash')
  requireKeyType(m.time, 'hash')
  requireKeyType(m.minutes, 'zset')
end

-- Deletes up to `limit` buckets older than the retention window; returns how many went.
trimMetrics = function(k, now, limit)
  local m = metricsKeys(k)
  local cutoff = math.floor(now / 60000) - METRICS_RETENTION_MINUTES
  local old = redis.call('ZRANGEBYSCORE', m.minutes, '-inf', cutoff, 'LIMIT', 0, limit)
  if #old == 0 then return 0 end
  redis.call('HDEL', m.completed, unpack(old))
  redis.call('HDEL', m.failed, unpack(old))
  redis.call('HDEL', m.time, unpack(old))
  redis.call('ZREM', m.minutes, unpack(old))
  return #old
end

-- Counts one finished attempt (or `attempts` of them, with their summed processing ms). Two
-- commands on the hot path; the index write and the trim run only for the first finish of a minute.
recordMetrics = function(k, now, completed, durationMs, attempts)
  local m = metricsKeys(k)
  local minute = math.floor(now / 60000)
  local counter = completed and m.completed or m.failed
  local n = redis.call('HINCRBY', counter, minute, attempts or 1)
  redis.call('HINCRBY', m.time, minute, durationMs)
  if n == (attempts or 1) then
    redis.call('PEXPIRE', counter, METRICS_KEY_TTL_MS)
    if redis.call('ZADD', m.minutes, minute, minute) == 1 then
      redis.call('PEXPIRE', m.time, METRICS_KEY_TTL_MS)
      redis.call('PEXPIRE', m.minutes, METRICS_KEY_TTL_MS)
      trimMetrics(k, now, METRICS_TRIM_BATCH)
    end
  end
end

-- The count stored in metrics hash `key` for `minute`, read before the first write (a key of
-- another type raises here), or nil. A value that is not a count is refused: HINCRBY would fail
-- on it halfway through the call.
local function metricsCount(key, minute)
  local v = redis.call('HGET', key, minute)
  if v and not string.find(v, '^%-?%d+$') then
    refuse('ERR_WRONG_TYPE', 'metrics key ' .. key .. ' field ' .. minute .. ' holds ' .. showArg(v) ..
      ', where glidemq keeps a count: another program wrote to it (delete the key)')
  end
  return v and tonumber(v)
end

-- Checks, before the first write, what recordMetrics will write at server time `now` for
-- `completed` / `failed` finishes: the minute's counters and time are read (metricsCount), and
-- the minute's first finish, which also writes the minutes index and trims, checks every metrics
-- key. Two reads on the hot path, where checking every key would take four TYPE calls.
checkMetrics = function(k, now, completed, failed)
  local m = metricsKeys(k)
  local minute = math.floor(now / 60000)
  local first = false
  if completed and (metricsCount(m.completed, minute) or 0) == 0 then first = true end
  if failed and (metricsCount(m.failed, minute) or 0) == 0 then first = true end
  metricsCount(m.time, minute)
  if first then requireMetricsTypes(k) end
end
end
