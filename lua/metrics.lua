--[[ metrics.lua — glidemq_getMetrics: reads the per-minute counters (lua/metrics-buckets.lua).
  Keys (all `<base>:metrics:*`): completed, failed, time — hashes whose field is the minute
  (floor(ms / 60000) of the server's clock) and whose value is the count of completed attempts,
  failed attempts (final or retried), and the processing ms of both; minutes — a sorted set of the
  minutes that have a bucket (score = member = minute), the index trimming and reading walk.
  Retention: the 1440 minutes up to and including the server's current one (24 hours).
  recordMetrics trims when a new minute gets its first bucket (at most once a minute); the
  promotion tick trims too (glidemq_upkeep), so a quiet queue is trimmed as well. Both count
  minutes on the server's clock (their callers pass serverNow()): a worker whose clock is off
  records its finishes in the server's current minute, where a reader looks for them. As a
  backstop for a queue that no worker serves any more, each key gets a TTL of the retention window
  plus a minute whenever a minute gets its first bucket: by the time Valkey expires a key, every
  bucket in it is out of the window.

  glidemq_getMetrics (read-only)
  KEYS[1]  meta key.
  ARGV[1]  from: start of the range in ms since the epoch (inclusive: its minute counts), or ''
           for `minutes` minutes up to and including the minute of `to`.
  ARGV[2]  to: end of the range in ms since the epoch (inclusive: its whole minute counts), or ''
           for the server's now. A user-given range is absolute; the defaults and the retention
           window come from the server's clock.
  ARGV[3]  minutes: the span of the default from (1..1440; 60 = the hour up to `to`).
  Returns  {fromMs, toMs, minute, completed, failed, processingMs, ...}: the range as read (whole
           minutes: from is moved up to at most 1440 minutes before to), then each minute of it
           that has a bucket and is inside the retention window, oldest first.
  Errors   ERR_INVALID (from or to, or from after to), ERR_WRONG_TYPE (a metrics key of another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local GET_METRICS_ARGS = { 'from', ARG.orEmpty(ARG.ms), 'to', ARG.orEmpty(ARG.ms),
  'minutes', ARG.int(1, METRICS_RETENTION_MINUTES) }

register('glidemq_getMetrics', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_getMetrics', args, GET_METRICS_ARGS)
  local now = serverNow()
  local to = a.to == '' and now or a.to
  local from = a.from == '' and math.max(0, to - (a.minutes - 1) * 60000) or a.from
  if from > to then refuse('ERR_INVALID', 'glidemq_getMetrics: from is after to (give a range with from <= to)') end
  local m = metricsKeys(k)
  local toMinute = math.floor(to / 60000)
  local first = math.max(math.floor(from / 60000), toMinute - METRICS_RETENTION_MINUTES + 1)
  local kept = math.floor(now / 60000) - METRICS_RETENTION_MINUTES + 1
  local out = { first * 60000, toMinute * 60000 }
  local minutes = redis.call('ZRANGEBYSCORE', m.minutes, math.max(first, kept), toMinute)
  if #minutes == 0 then return out end
  local c = redis.call('HMGET', m.completed, unpack(minutes))
  local f = redis.call('HMGET', m.failed, unpack(minutes))
  local t = redis.call('HMGET', m.time, unpack(minutes))
  for i, minute in ipairs(minutes) do
    out[#out + 1] = tonumber(minute)
    out[#out + 1] = toInt(c[i], 0)
    out[#out + 1] = toInt(f[i], 0)
    out[#out + 1] = toInt(t[i], 0)
  end
  return out
end, { 'no-writes' })
end
