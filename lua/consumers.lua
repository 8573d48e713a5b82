--[[ consumers.lua — glidemq_removeIdleConsumer
  KEYS[1] meta key.  ARGV: consumer.
  Deletes the consumer from the group of the job stream (and of the wake stream) only when it
  holds no pending entry — checked and deleted in one step, because XGROUP DELCONSUMER would
  drop pending entries and with them the record of claimed jobs.
  Returns 1 when deleted, 0 when it still holds entries or did not exist.
]]
redis.register_function('glidemq_removeIdleConsumer', function(keys, args)
  local k = keysFor(keys[1])
  local consumer = args[1]
  if redis.call('EXISTS', k.stream) == 0 then return 0 end
  local held = redis.call('XPENDING', k.stream, GROUP, '-', '+', 1, consumer)
  if #held > 0 then return 0 end
  local removed = redis.pcall('XGROUP', 'DELCONSUMER', k.stream, GROUP, consumer)
  if redis.call('EXISTS', k.wake) == 1 then redis.pcall('XGROUP', 'DELCONSUMER', k.wake, GROUP, consumer) end
  if type(removed) == 'table' and removed.err then return 0 end
  return 1
end)
