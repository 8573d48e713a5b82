--[[ promote.lua — glidemq_promote: moves delayed jobs whose time has come to where workers take them.
  KEYS[1]  meta key.
  ARGV[1]  limit: jobs moved per call (1..10000).
  Returns  {promoted, nextDueIn}: nextDueIn is how many ms from now (the server's TIME) the earliest
           delayed job or rate-limited group (timed-groups) is due, or -1 when none is. A relative
           time, so the caller can wait for it on its own clock whatever that clock says.
           Due groups go back to ready-groups and wake workers. A due job of a group rejoins
           its group's line at its seq: a delayed job of an ordered group, which held its place
           in the line through its delay, becomes waiting in that place (lua/group.lua).
  Events   'waiting' (prev 'delayed') per promoted job, only while a QueueEvents listens.
  Errors   ERR_INVALID (limit), ERR_WRONG_TYPE (a key it writes holds another type).
           A scheduled id whose job hash is gone (removed) is dropped, never re-created.
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local PROMOTE_ARGS = { 'limit', ARG.int(1, MAX_COUNT) }
local PROMOTE_WRITES = { 'meta', 'hash', 'scheduled', 'zset', 'stream', 'stream', 'prioritized', 'zset',
  'lifo', 'list', 'wake', 'stream', 'events', 'stream', 'readyGroups', 'zset', 'timedGroups', 'zset' }

register('glidemq_promote', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_promote', args, PROMOTE_ARGS)
  requireTypes(k, PROMOTE_WRITES)
  local now = serverNow()
  local due = redis.call('ZRANGEBYSCORE', k.scheduled, '-inf', now, 'LIMIT', 0, a.limit)
  -- Every due job's hash, and the keys of the group it rejoins, are checked before the first write.
  local delayed = {}
  for i, id in ipairs(due) do
    local jk = jobKey(k, id)
    requireKeyType(jk, 'hash')
    local f = redis.call('HMGET', jk, 'state', 'grp')
    delayed[i] = f[1] == 'delayed'
    if delayed[i] and f[2] then groupRequireTypes(k, f[2]) end
  end
  local promoted = 0
  local listen = listening(k, now)
  for i, id in ipairs(due) do
    redis.call('ZREM', k.scheduled, id)
    if delayed[i] then
      redis.call('HSET', jobKey(k, id), 'delay', 0) -- job.delay is live, as BullMQ keeps it
      requeue(k, id, jobKey(k, id))
      if listen then emit(k, 'waiting', id, 'prev', 'delayed') end
      promoted = promoted + 1
    end
  end
  promoteTimedGroups(k, now)
  local nxt = redis.call('ZRANGE', k.scheduled, 0, 0, 'WITHSCORES')
  local nextDue = -1
  if nxt[2] then nextDue = toInt(nxt[2], -1) end
  local groupDue = nextTimedGroup(k)
  if groupDue and (nextDue < 0 or groupDue < nextDue) then nextDue = groupDue end
  if nextDue < 0 then return { promoted, -1 } end
  return { promoted, math.max(0, nextDue - now) }
end)
end
