--[[ remove.lua — glidemq_removeJob
  KEYS[1] meta key.  ARGV: jobId, force ('1' removes an active job too).
  Returns 1 when removed, 0 when there was no such job.
  Errors: ERR_JOB_ACTIVE when the job is being processed and force is not given.
  The hash goes last: structures that still name the id drop it when they meet it (never re-create).
]]
redis.register_function('glidemq_removeJob', function(keys, args)
  local k = keysFor(keys[1])
  local id, force = args[1], args[2] == '1'
  local jk = jobKey(k, id)
  local f = redis.call('HMGET', jk, 'state', 'sid')
  if not f[1] then return 0 end
  if f[1] == 'active' and not force then
    return fail('ERR_JOB_ACTIVE', 'job ' .. id .. ' is being processed; wait for it to finish or remove it with force')
  end
  if f[1] == 'active' then
    releaseActive(k, id, jk)
  elseif f[1] == 'waiting' and f[2] then
    redis.call('XDEL', k.stream, f[2])
  end
  groupForget(k, id, jk)
  redis.call('ZREM', k.scheduled, id)
  redis.call('ZREM', k.prioritized, id)
  redis.call('LREM', k.lifo, 0, id)
  redis.call('ZREM', k.completed, id)
  redis.call('ZREM', k.failed, id)
  redis.call('DEL', jk, jk .. ':logs')
  emit(k, 'removed', id)
  return 1
end)
