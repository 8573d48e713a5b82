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
