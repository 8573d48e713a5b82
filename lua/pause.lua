--[[ pause.lua — glidemq_pause, glidemq_resume
  Pause is a flag every delivery and reclaim path reads (fetch, activate, finish's fetch, both
  stalled-reclaim functions). Both wake blocked workers (an entry on the wake stream), so an idle
  worker hears of a pause or a resume at once (its queuePaused / queueResumed) instead of when its
  block timeout runs out.
  Both check the type of every key they write before the first write.

  glidemq_pause
    KEYS[1]  meta key.
    ARGV     none.
    Returns  1 when the queue was paused by this call, 0 when it already was (a queue seen for the
             first time is created, paused).
    Errors   ERR_INVALID (any argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_resume
    KEYS[1]  meta key.
    ARGV     none.
    Returns  1 when the queue was resumed by this call, 0 when it was not paused.
    Errors   ERR_INVALID (any argument), ERR_WRONG_TYPE (a key it writes holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local PAUSE_ARGS = {}
-- ensureQueue may create the meta hash and both streams' groups; the events stream takes the event
local PAUSE_WRITES = { 'meta', 'hash', 'stream', 'stream', 'wake', 'stream', 'events', 'stream' }
local RESUME_WRITES = { 'meta', 'hash', 'wake', 'stream', 'events', 'stream' }

register('glidemq_pause', function(keys, args)
  local k = keysFor(keys[1])
  decodeArgs('glidemq_pause', args, PAUSE_ARGS)
  requireTypes(k, PAUSE_WRITES)
  ensureQueue(k)
  if isPaused(k) then return 0 end
  redis.call('HSET', k.meta, 'paused', '1')
  emit(k, 'paused', '')
  wakeWorkers(k)
  return 1
end)

register('glidemq_resume', function(keys, args)
  local k = keysFor(keys[1])
  decodeArgs('glidemq_resume', args, PAUSE_ARGS)
  requireTypes(k, RESUME_WRITES)
  if not isPaused(k) then return 0 end
  redis.call('HDEL', k.meta, 'paused')
  emit(k, 'resumed', '')
  wakeWorkers(k)
  return 1
end)
end
