--[[ consumers.lua — glidemq_removeIdleConsumer
  Deletes the consumer from the group of the job stream (and of the wake stream) only when it
  holds no pending entry — checked and deleted in one step, because XGROUP DELCONSUMER would
  drop pending entries and with them the record of claimed jobs.
  KEYS[1]  meta key.
  ARGV[1]  consumer: the consumer to delete (a worker's own, on close).
  Returns  1 when deleted, 0 when it still holds entries or did not exist (or there is no group).
  Its removal records in removed-finishes (lua/finish.lua recordRemoved) are deleted with it.
  Errors   ERR_INVALID (consumer), ERR_WRONG_TYPE (the job or wake stream, or removed-finishes,
           holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local REMOVE_CONSUMER_ARGS = { 'consumer', ARG.nonEmpty }
local REMOVE_CONSUMER_WRITES = { 'stream', 'stream', 'wake', 'stream', 'removedFinishes', 'hash' }

register('glidemq_removeIdleConsumer', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_removeIdleConsumer', args, REMOVE_CONSUMER_ARGS)
  requireTypes(k, REMOVE_CONSUMER_WRITES)
  if redis.call('EXISTS', k.stream) == 0 then return 0 end
  local held = redis.pcall('XPENDING', k.stream, GROUP, '-', '+', 1, a.consumer)
  if type(held) ~= 'table' or held.err then return 0 end -- no group: no consumer to delete
  if #held > 0 then return 0 end
  local removed = redis.pcall('XGROUP', 'DELCONSUMER', k.stream, GROUP, a.consumer)
  if redis.call('EXISTS', k.wake) == 1 then redis.pcall('XGROUP', 'DELCONSUMER', k.wake, GROUP, a.consumer) end
  if type(removed) == 'table' and removed.err then return 0 end
  REMOVAL_RECORDS.forget(k, a.consumer)
  return 1
end)
end
