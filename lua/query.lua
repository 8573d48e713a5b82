--[[ query.lua — glidemq_getCounts
  KEYS[1] meta key.  ARGV: none.
  Returns a flat list: waiting, active, delayed, prioritized, completed, failed, paused (1|0),
          listActive, streamPending, groupWaiting.
  waiting counts stream entries not yet delivered, LIFO jobs and jobs waiting in groups; active
  counts stream pending entries plus claimed priority/LIFO/group jobs.
]]
redis.register_function{
  function_name = 'glidemq_getCounts',
  flags = { 'no-writes' },
  callback = function(keys)
    local k = keysFor(keys[1])
    local streamLen, pending = 0, 0
    if redis.call('EXISTS', k.stream) == 1 then
      streamLen = redis.call('XLEN', k.stream)
      local ok, p = pcall(redis.call, 'XPENDING', k.stream, GROUP)
      if ok then pending = toInt(p[1], 0) end
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
  end,
}
