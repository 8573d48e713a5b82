--[[ metrics.lua — per-minute counters (locals recordMetrics / trimMetrics) and glidemq_getMetrics.
  Keys (all `<base>:metrics:*`): completed, failed, time — hashes whose field is the minute
  (floor(ms / 60000)) and whose value is the count of completed attempts, failed attempts (final
  or retried), and the processing ms of both; minutes — a sorted set of the minutes that have a
  bucket (score = member = minute), the index trimming and reading walk.
  Retention: the 1440 minutes up to and including the current one (24 hours). recordMetrics
  trims when a new minute gets its first bucket (at most once a minute); the promotion tick trims
  too (glidemq_upkeep), so a quiet queue is trimmed as well. Both take `now` from the caller, so
  tests can move the clock. As a backstop for a queue that no worker serves any more, each key
  gets a TTL of the retention window plus a minute whenever a minute gets its first bucket: by the
  time Valkey expires a key, every bucket in it is out of the window.

  glidemq_getMetrics  KEYS[1] meta. ARGV: fromMs, toMs, now(ms).
    Returns a flat list minute, completed, failed, processingMs for each minute in [from, to]
    that has a bucket and is inside the retention window, oldest first. Read-only.
]]
local METRICS_RETENTION_MINUTES = 1440
local METRICS_TRIM_BATCH = 500
local METRICS_KEY_TTL_MS = (METRICS_RETENTION_MINUTES + 1) * 60000

local function metricsKeys(k)
  local m = k.base .. ':metrics:'
  return { completed = m .. 'completed', failed = m .. 'failed', time = m .. 'time', minutes = m .. 'minutes' }
end

-- Deletes up to `limit` buckets older than the retention window; returns how many went.
local function trimMetrics(k, now, limit)
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
local function recordMetrics(k, now, completed, durationMs, attempts)
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

redis.register_function{
  function_name = 'glidemq_getMetrics',
  flags = { 'no-writes' },
  callback = function(keys, args)
    local k = keysFor(keys[1])
    local m = metricsKeys(k)
    local from, to, now = toInt(args[1], 0), toInt(args[2], 0), toInt(args[3], 0)
    local first = math.max(math.floor(from / 60000), math.floor(now / 60000) - METRICS_RETENTION_MINUTES + 1)
    local minutes = redis.call('ZRANGEBYSCORE', m.minutes, first, math.floor(to / 60000))
    local out = {}
    if #minutes == 0 then return out end
    local c = redis.call('HMGET', m.completed, unpack(minutes))
    local f = redis.call('HMGET', m.failed, unpack(minutes))
    local t = redis.call('HMGET', m.time, unpack(minutes))
    for i, minute in ipairs(minutes) do
      out[#out + 1] = minute
      out[#out + 1] = toInt(c[i], 0)
      out[#out + 1] = toInt(f[i], 0)
      out[#out + 1] = toInt(t[i], 0)
    end
    return out
  end,
}
