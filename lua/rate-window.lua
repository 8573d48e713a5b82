--[[ rate-window.lua — shared locals: the queue-wide rate limiter (BullMQ's Worker option
  `limiter: { max, duration }`) and the hold of worker.rateLimit(ms) (lua/rate-limit.lua).
  Meta fields, read by every claim path in the one HMGET of meta it makes anyway (positions 4 to
  6 of RATE.META, so a queue without them pays for three nil fields and one test):
    rateMax, rateDuration  at most rateMax jobs start in any rateDuration ms, across all workers
                           (a worker with a limiter writes both when it starts).
    rateHoldUntil          no job starts before this server time, in ms (glidemq_rateLimit).
  <base>:rate-log  zset of the starts of the last rateDuration ms: member '<id>:<fence>' (one per
           claim; a claim handed over again is the same start), score = the server's time of the
           start (the job's processedOn). A sliding log rather than BullMQ's fixed window, whose
           edge lets 2 x max starts through within one duration; it expires with the window.
  Every time is the server's: `now` is the calling function's serverNow(). A wait goes back to
  the worker relative (ms from the server's now), so no client clock ever compares with it.
]]
-- One shared local (the main chunk's locals are few, lua/ORDER): RATE.META, RATE.TYPES,
-- RATE.limited, RATE.room, RATE.record.
local RATE = {}
do
-- The room of a queue with no limiter and no hold (as the free slots of glidemq_activate for no globalConcurrency).
local UNLIMITED = 1000000000

-- The meta fields the claim paths read (fetch, activate, finish's fetch): HMGET k.meta, unpack(...).
-- (The 7th, lockFloor, is the claims' terms', lua/activate.lua claimTerms.)
RATE.META = { 'paused', 'globalConcurrency', 'eventsUntil', 'rateMax', 'rateDuration', 'rateHoldUntil', 'lockFloor' }
-- The key RATE.record writes (checked by the callers before their first write).
RATE.TYPES = { 'rateLog', 'zset' }

-- Whether `m` (the HMGET of RATE.META) names a limiter: the worker then takes jobs only through
-- glidemq_fetch and glidemq_finish, as under a globalConcurrency limit (status 'limited').
RATE.limited = function(m)
  return toInt(m[4], 0) > 0 and toInt(m[5], 0) > 0
end

--[[ Starts allowed at server time `now` under the limiter and hold of `m`, and, when none is, the
  ms until one is (at least 1). Reads only: callers run it in their check phase or after writes. ]]
RATE.room = function(k, now, m)
  if not m[4] and not m[6] then return UNLIMITED, 0 end
  local holdUntil = tonumber(m[6])
  if holdUntil and holdUntil > now then return 0, holdUntil - now end
  if not RATE.limited(m) then return UNLIMITED, 0 end
  local max, duration = toInt(m[4], 0), toInt(m[5], 0)
  local since = '(' .. (now - duration)
  local used = redis.call('ZCOUNT', k.rateLog, since, '+inf')
  if used < max then return max - used, 0 end
  -- full: the next start may happen when the oldest start beyond max - 1 leaves the window
  local oldest = redis.call('ZRANGEBYSCORE', k.rateLog, since, '+inf', 'WITHSCORES', 'LIMIT', used - max, 1)
  local wait = (tonumber(oldest[2]) or now) + duration - now
  -- (a server clock stepped back leaves starts in the future: never more than one duration)
  return 0, math.max(1, math.min(wait, duration))
end

--[[ Logs the starts of the claim replies `jobs` (lua/activate.lua claimJob: id, fence, ...) from
  index `first` (default 1) on, made at `now`, and drops those the window has left behind. NX: a
  claim handed over again keeps its first start. ]]
RATE.record = function(k, now, m, jobs, first)
  first = first or 1
  if #jobs < first or not RATE.limited(m) then return end
  local duration = toInt(m[5], 0)
  -- in parts: unpack passes at most a few thousand values
  for from = first, #jobs, 500 do
    local args, n = { 'NX' }, 1
    for i = from, math.min(#jobs, from + 499) do
      args[n + 1], args[n + 2] = now, jobs[i][1] .. ':' .. jobs[i][2]
      n = n + 2
    end
    redis.call('ZADD', k.rateLog, unpack(args))
  end
  redis.call('ZREMRANGEBYSCORE', k.rateLog, '-inf', now - duration)
  redis.call('PEXPIRE', k.rateLog, duration)
end
end
