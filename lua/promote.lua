--[[ promote.lua — glidemq_promote: moves delayed jobs whose time has come to where workers take them.
  KEYS[1]  meta key.
  ARGV     now(ms), limit (jobs per call).
  Returns  {promoted, nextDue} — nextDue is the earliest time a delayed job or a rate-limited group
           (timed-groups) is due, or -1. Due groups go back to ready-groups and wake workers.
  Errors   none. A scheduled id whose job hash is gone (removed) is dropped, never re-created.
]]
redis.register_function('glidemq_promote', function(keys, args)
  local k = keysFor(keys[1])
  local now, limit = toInt(args[1], 0), toInt(args[2], 1000)
  local due = redis.call('ZRANGEBYSCORE', k.scheduled, '-inf', now, 'LIMIT', 0, limit)
  local promoted = 0
  for _, id in ipairs(due) do
    redis.call('ZREM', k.scheduled, id)
    local jk = jobKey(k, id)
    if redis.call('HGET', jk, 'state') == 'delayed' then
      requeue(k, id, jk)
      promoted = promoted + 1
    end
  end
  promoteTimedGroups(k, now)
  local nxt = redis.call('ZRANGE', k.scheduled, 0, 0, 'WITHSCORES')
  local nextDue = -1
  if nxt[2] then nextDue = toInt(nxt[2], -1) end
  local groupDue = nextTimedGroup(k)
  if groupDue and (nextDue < 0 or groupDue < nextDue) then nextDue = groupDue end
  return { promoted, nextDue }
end)
