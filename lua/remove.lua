--[[ remove.lua — removing jobs: glidemq_removeJob, glidemq_drain, glidemq_clean
  A job hash goes last, after every structure that names it: a structure that still names a
  removed id drops it when it meets it, so a removed job is never re-created by a late write.

  glidemq_removeJob  KEYS[1] meta. ARGV: jobId, force ('1' also removes an active job).
                     Returns 1 when removed, 0 when there was no such job.
                     Errors: ERR_JOB_ACTIVE when the job is being processed and force is not given.
  glidemq_drain      KEYS[1] meta. ARGV: includeDelayed ('1'|'0'), limit, dryRun ('1'|'0').
                     Removes up to `limit` jobs that wait (stream entries not yet delivered, LIFO,
                     prioritized, and delayed when asked); active jobs are left alone.
                     Returns {removed (or would remove), more (1 when jobs are left to drain)}.
  glidemq_clean      KEYS[1] meta. ARGV: state ('completed'|'failed'), olderThan (ms), limit, dryRun.
                     Returns the ids removed (or that would be), oldest first.
                     Errors: ERR_INVALID for another state.
]]

-- Removes a job that is not active from every structure, then its hash and logs.
local function dropJob(k, id, jk)
  local sid = redis.call('HGET', jk, 'sid')
  if sid then redis.call('XDEL', k.stream, sid) end
  groupForget(k, id, jk)
  redis.call('ZREM', k.scheduled, id)
  redis.call('ZREM', k.prioritized, id)
  redis.call('LREM', k.lifo, 0, id)
  redis.call('ZREM', k.completed, id)
  redis.call('ZREM', k.failed, id)
  redis.call('DEL', jk, jk .. ':logs')
  emit(k, 'removed', id)
end

redis.register_function('glidemq_removeJob', function(keys, args)
  local k = keysFor(keys[1])
  local id, force = args[1], args[2] == '1'
  local jk = jobKey(k, id)
  local state = redis.call('HGET', jk, 'state')
  if not state then return 0 end
  if state == 'active' and not force then
    return fail('ERR_JOB_ACTIVE', 'job ' .. id .. ' is being processed; wait for it to finish or remove it with force')
  end
  if state == 'active' then releaseActive(k, id, jk) end
  dropJob(k, id, jk)
  return 1
end)

-- Ids of stream entries no worker has been given yet (those after the group's last delivery).
local function undelivered(k, limit)
  if redis.call('EXISTS', k.stream) == 0 then return {} end
  local last = '0-0'
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', k.stream)) do
    for i = 1, #g, 2 do
      if g[i] == 'name' and g[i + 1] ~= GROUP then break end
      if g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
  end
  local ids = {}
  for _, e in ipairs(redis.call('XRANGE', k.stream, '(' .. last, '+', 'COUNT', limit)) do
    ids[#ids + 1] = e[2][2]
  end
  return ids
end

redis.register_function('glidemq_drain', function(keys, args)
  local k = keysFor(keys[1])
  local withDelayed, limit, dry = args[1] == '1', toInt(args[2], 1000), args[3] == '1'
  local ids = undelivered(k, limit)
  local function take(list)
    for _, id in ipairs(list) do
      if #ids >= limit then return end
      ids[#ids + 1] = id
    end
  end
  take(redis.call('LRANGE', k.lifo, 0, limit - 1))
  take(redis.call('ZRANGE', k.prioritized, 0, limit - 1))
  if withDelayed then take(redis.call('ZRANGE', k.scheduled, 0, limit - 1)) end
  if dry then
    local total = #undelivered(k, 1000000) + redis.call('LLEN', k.lifo) + redis.call('ZCARD', k.prioritized)
    if withDelayed then total = total + redis.call('ZCARD', k.scheduled) end
    return { total, 0 }
  end
  local removed = 0
  for _, id in ipairs(ids) do
    local jk = jobKey(k, id)
    local state = redis.call('HGET', jk, 'state')
    if state and state ~= 'active' then
      dropJob(k, id, jk)
      removed = removed + 1
    elseif not state then
      redis.call('LREM', k.lifo, 0, id)
      redis.call('ZREM', k.prioritized, id)
      redis.call('ZREM', k.scheduled, id)
    end
  end
  local more = (#ids >= limit) and 1 or 0
  return { removed, more }
end)

redis.register_function('glidemq_clean', function(keys, args)
  local k = keysFor(keys[1])
  local state, olderThan, limit, dry = args[1], toInt(args[2], 0), toInt(args[3], 1000), args[4] == '1'
  local set
  if state == 'completed' then set = k.completed elseif state == 'failed' then set = k.failed
  else return fail('ERR_INVALID', 'clean takes completed or failed, got ' .. tostring(state)) end
  local ids = redis.call('ZRANGEBYSCORE', set, '-inf', olderThan, 'LIMIT', 0, limit)
  if dry then return ids end
  for _, id in ipairs(ids) do dropJob(k, id, jobKey(k, id)) end
  return ids
end)
