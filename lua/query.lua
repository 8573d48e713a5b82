--[[ query.lua — glidemq_getCounts. Read-only.
  KEYS[1]  meta key.
  ARGV     none.
  Returns  a flat list: waiting, active, delayed, prioritized, completed, failed, paused (1|0),
           listActive, streamPending, groupWaiting.
           waiting counts stream entries not yet delivered, LIFO jobs and jobs waiting in groups
           (meta's groupWaiting); active counts stream pending entries plus claimed
           priority/LIFO/group jobs; delayed counts the scheduled set, which holds the delayed jobs
           of ordered groups that keep their place in their group's line (lua/group.lua).
           glidemq_drain removes exactly the jobs counted as waiting and prioritized (and delayed
           when asked); Queue.getJobs lists them by the same rules.
  Errors   ERR_INVALID (any argument), ERR_WRONG_TYPE (a key it reads holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local COUNTS_ARGS = {}

register('glidemq_getCounts', function(keys, args)
  local k = keysFor(keys[1])
  decodeArgs('glidemq_getCounts', args, COUNTS_ARGS)
  local streamLen, pending = 0, 0
  if redis.call('EXISTS', k.stream) == 1 then
    streamLen = redis.call('XLEN', k.stream)
    local p = redis.pcall('XPENDING', k.stream, GROUP)
    if type(p) == 'table' and not p.err then pending = toInt(p[1], 0) end -- no group yet: none pending
  end
  local listActive = toInt(redis.call('GET', k.listActive), 0)
  local groupWaiting = toInt(redis.call('HGET', k.meta, 'groupWaiting'), 0)
  if groupWaiting < 0 then groupWaiting = 0 end
  local waiting = streamLen - pending + redis.call('LLEN', k.lifo) + groupWaiting
  if waiting < 0 then waiting = 0 end
  return {
    waiting, pending + listActive, redis.call('ZCARD', k.scheduled), redis.call('ZCARD', k.prioritized),
    redis.call('ZCARD', k.completed), redis.call('ZCARD', k.failed), isPaused(k) and 1 or 0,
    listActive, pending, groupWaiting,
  }
end, { 'no-writes' })
end
