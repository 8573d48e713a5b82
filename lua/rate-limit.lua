--[[ rate-limit.lua — glidemq_rateLimit: holds the whole queue (BullMQ's worker.rateLimit(ms)).
  No worker of the queue starts a job until `ms` from the server's now: the claim paths read the
  hold from meta (lua/rate-window.lua) and answer 'rated' with the wait, which workers sit out on
  a timer. A hold only ever grows: a shorter one over a longer one leaves the longer in place, so
  two workers that each call it never end the other's hold early. Jobs already claimed run on.
  KEYS[1]  meta key.
  ARGV[1]  ms: how long to hold the queue, in ms from the server's now (0..2^53-1; 0 adds nothing).
  Returns  the ms the queue stays held from now (0: no hold).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (the meta key holds another type).
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
local RATE_LIMIT_ARGS = { 'ms', ARG.ms }
local RATE_LIMIT_WRITES = { 'meta', 'hash' }

register('glidemq_rateLimit', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_rateLimit', args, RATE_LIMIT_ARGS)
  requireTypes(k, RATE_LIMIT_WRITES)
  local now = serverNow()
  local current = tonumber(redis.call('HGET', k.meta, 'rateHoldUntil')) or 0
  local holdUntil = now + a.ms
  if holdUntil <= current then return math.max(0, current - now) end
  if a.ms == 0 then return 0 end
  -- %.0f: `..` would write a time past 10^14 ms in exponent form
  redis.call('HSET', k.meta, 'rateHoldUntil', string.format('%.0f', holdUntil))
  return a.ms
end)
end
