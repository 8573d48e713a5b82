--[[ pause.lua — glidemq_pause, glidemq_resume
  KEYS[1] meta key.  ARGV: none.
  Returns 1 when the state changed, 0 when it already was so.
  Pause is a flag every delivery and reclaim path reads (fetch, activate, finish's fetch, both
  stalled-reclaim functions). Resume wakes blocked workers so they do not wait out a block timeout.
]]
redis.register_function('glidemq_pause', function(keys)
  local k = keysFor(keys[1])
  ensureQueue(k)
  if isPaused(k) then return 0 end
  redis.call('HSET', k.meta, 'paused', '1')
  emit(k, 'paused', '')
  return 1
end)

redis.register_function('glidemq_resume', function(keys)
  local k = keysFor(keys[1])
  if not isPaused(k) then return 0 end
  redis.call('HDEL', k.meta, 'paused')
  emit(k, 'resumed', '')
  wakeWorkers(k)
  return 1
end)
