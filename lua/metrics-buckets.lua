--[[ metrics-buckets.lua — the per-minute counters (no registered functions here): checkMetrics and
  recordMetrics (used by lua/finish.lua and lua/reclaim.lua: every finished attempt, a stalled
  failure too, is counted), trimMetrics (lua/upkeep.lua) and requireMetricsTypes (both). The key
  layout and retention are described in lua/metrics.lua. `now` is always the server's time: the
  caller's serverNow(), never a time a client sent. Also the lifetime counters and histogram in
  the meta hash (metricsKeys(k).lifetime, described below).
]]
local METRICS_RETENTION_MINUTES = 1440
-- Defined in the block below, whose other locals stay inside it (the main chunk may hold at most 200).
local metricsKeys, requireMetricsTypes, trimMetrics, recordMetrics, checkMetrics
do
local METRICS_TRIM_BATCH = 500
local METRICS_KEY_TTL_MS = (METRICS_RETENTION_MINUTES + 1) * 60000

--[[ The lifetime counters (Prometheus' counters and processing-time histogram, read by
  src/engine/inspecting/lifetime-metrics.ts), kept for good in fields of the queue's meta hash,
  which every finish reads already (so its type is checked there): never trimmed, only ever
  incremented, and gone only with the queue (obliterate).
    pt:c:<le>  completed attempts whose processing took at most <le> ms (and more than the bound
               before it; 'inf' for the rest): a histogram bucket, not cumulative. Their sum is
               the queue's completed jobs (a job completes once).
    pt:f:<le>  failed attempts, retried or not, the same way.
    pt:c:ms, pt:f:ms  the processing ms of those attempts, summed.
    failed     jobs failed for good, by any path: a processor's failure with no retry left, a
               stalled job over its limit (lua/reclaim.lua), a revoked job (lua/revoke.lua), a
               parent failed by its child (lua/flow-keys.lua): lua/outcomes.lua storeFailure.
  A finish pays one HINCRBY for the bucket and one for the ms; glidemq_finishMany pays them once
  per distinct bucket in its batch. A field that another program set to a value that is not a
  count is set afresh (a counter reset, which Prometheus expects) rather than failing the finish
  halfway through its writes. Reached through metricsKeys(k).lifetime (no local of
  its own: the main chunk's locals are few). ]]
local LIFETIME = {}
local BOUNDS_MS = { 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 1800000 }
local BUCKETS = { [true] = {}, [false] = {} }
for i = 1, #BOUNDS_MS do -- (ipairs is not reachable while the library loads)
  BUCKETS[true][i], BUCKETS[false][i] = 'pt:c:' .. BOUNDS_MS[i], 'pt:f:' .. BOUNDS_MS[i]
end
BUCKETS[true][#BOUNDS_MS + 1], BUCKETS[false][#BOUNDS_MS + 1] = 'pt:c:inf', 'pt:f:inf'
local SUM = { [true] = 'pt:c:ms', [false] = 'pt:f:ms' }

local function add(meta, field, n)
  local r = redis.pcall('HINCRBY', meta, field, n)
  if type(r) == 'table' and r.err then redis.pcall('HSET', meta, field, n) end
end

-- The bucket field of an attempt of `ms` that `completed` (or failed).
local function bucketOf(completed, ms)
  local fields = BUCKETS[completed]
  for i = 1, #BOUNDS_MS do
    if ms <= BOUNDS_MS[i] then return fields[i] end
  end
  return fields[#BOUNDS_MS + 1]
end

-- One attempt its worker finished (completed, or failed whether retried or not), of `ms`.
LIFETIME.attempt = function(k, completed, ms)
  add(k.meta, bucketOf(completed, ms), 1)
  if ms > 0 then add(k.meta, SUM[completed], ms) end
end

-- A batch's attempts, tallied inline by the caller (glidemq_finishMany: a function call per job
-- costs more than the rest of the tally): LIFETIME.BOUNDS ends with a bound no time exceeds, so
-- `local i = 1; while ms > BOUNDS[i] do i = i + 1 end` finds an attempt's bucket; the counts of
-- each outcome go in an array by bucket (`completed`, `failed`, nil when none), flushed once.
LIFETIME.BOUNDS = {}
for i = 1, #BOUNDS_MS do LIFETIME.BOUNDS[i] = BOUNDS_MS[i] end
LIFETIME.BOUNDS[#BOUNDS_MS + 1] = 1 / 0
local function flushCounts(meta, fields, counts)
  if not counts then return end
  for i = 1, #BOUNDS_MS + 1 do
    if counts[i] then add(meta, fields[i], counts[i]) end
  end
end
LIFETIME.flush = function(k, completed, failed, msCompleted, msFailed)
  flushCounts(k.meta, BUCKETS[true], completed)
  flushCounts(k.meta, BUCKETS[false], failed)
  if msCompleted > 0 then add(k.meta, SUM[true], msCompleted) end
  if msFailed > 0 then add(k.meta, SUM[false], msFailed) end
end

-- A job failed for good (lua/outcomes.lua storeFailure).
LIFETIME.failedForGood = function(k)
  add(k.meta, 'failed', 1)
end

-- Built once per call and kept on the call's key table: a finish checks and then records them.
metricsKeys = function(k)
  local mk = rawget(k, 'metricsKeys')
  if mk then return mk end
  local m = k.base .. ':metrics:'
  mk = { completed = m .. 'completed', failed = m .. 'failed', time = m .. 'time', minutes = m .. 'minutes', lifetime = LIFETIME }
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
