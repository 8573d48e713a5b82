--[[ events.lua — glidemq_listenEvents: a QueueEvents (src/engine/inspecting/queue-events.ts) says it listens.
  The events of the per-job path (lua/activate.lua 'active' when a job is claimed; lua/finish.lua
  'completed' with its return value, 'retries-exhausted' and 'drained') cost an XADD per job, a
  tenth of a finish's cost: they are written only while a QueueEvents listens, that is while the
  queue's meta field eventsUntil (ms of the server's clock) is ahead of the server's TIME. The
  claim and finish paths read the field in the HMGET of meta they make anyway (lua/activate.lua
  listening), so a queue nobody listens to pays nothing for it. A QueueEvents calls this when it
  starts and every third of `ttl` after, so the field stays ahead while it runs; the events stop
  at most `ttl` ms after the last QueueEvents stopped calling. The rule, as a QueueEvents sees it:
  every per-job event after the id this call returns is written, for as long as it keeps calling.
  Events outside the per-job path (failed, retrying, stalled, progress, added, paused, ...) are
  written whether anyone listens or not, except a flow's 'added' and 'waiting-children' (one per
  node of a flow, lua/flow.lua) and a parent's 'waiting' when its children are done (one per
  parent, lua/flow-keys.lua), which are written only while a QueueEvents listens too.

  KEYS[1]  meta key.
  ARGV[1]  ttl: ms from the server's now that the presence lasts (1000..86400000).
  Returns  {lastEventId, lapsed}: lastEventId is the id of the newest event ('0-0' when there is
           none): a QueueEvents asked to read from '$' reads after it, and sees every event written
           after this call. lapsed is 1 when no QueueEvents was present right before this call (the
           per-job events of the time before were not written: a QueueEvents then re-reads the
           stored state of the jobs it waits for), else 0.
  Errors   ERR_INVALID (ttl), ERR_WRONG_TYPE (the meta or events key holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local LISTEN_ARGS = { 'ttl', ARG.int(1000, 86400000) }
local LISTEN_TYPES = { 'meta', 'hash' }

register('glidemq_listenEvents', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_listenEvents', args, LISTEN_ARGS)
  requireTypes(k, LISTEN_TYPES)
  local now = serverNow()
  local was = tonumber(redis.call('HGET', k.meta, 'eventsUntil')) or 0
  local last = lastEventId(k) -- a stream of another type raises here, before the write
  if now + a.ttl > was then redis.call('HSET', k.meta, 'eventsUntil', now + a.ttl) end
  return { last, was > now and 0 or 1 }
end)
end
