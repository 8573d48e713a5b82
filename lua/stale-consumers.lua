--[[ stale-consumers.lua — removeStaleConsumers (no registered functions here), used by
  glidemq_removeStaleConsumers (lua/consumer-cleanup.lua) and the stalled reclaim (lua/reclaim.lua).
  Idle times are the server's (XINFO CONSUMERS): no caller's clock decides which consumer goes.
  Callers check the types of the job stream, the wake stream and removed-finishes before calling
  it. A deleted consumer's removal records go with it: nothing it sent can be repeated any more.

  REMOVAL_RECORDS: the one description of a consumer's ring of removal records in removed-finishes
  (written by lua/finish.lua recordRemoved, read by removedFinish, deleted with the consumer here
  and by glidemq_removeIdleConsumer): 'n:<consumer>' counts its records, '<slot>:<consumer>' holds
  one, `slots` of them.
]]
local REMOVAL_RECORDS = { slots = 16 }

-- The field of record number `n` of `consumer`'s ring.
function REMOVAL_RECORDS.field(n, consumer)
  return (n % REMOVAL_RECORDS.slots) .. ':' .. consumer
end

-- Deletes `consumer`'s ring (the caller checked removed-finishes' type).
function REMOVAL_RECORDS.forget(k, consumer)
  local fields = { 'n:' .. consumer }
  for slot = 0, REMOVAL_RECORDS.slots - 1 do fields[#fields + 1] = REMOVAL_RECORDS.field(slot, consumer) end
  redis.call('HDEL', k.removedFinishes, unpack(fields))
end

local removeStaleConsumers
do
local CONSUMER_CLEANUP_LIMIT = 20

removeStaleConsumers = function(k, keep, idleMs, dry)
  if redis.call('EXISTS', k.stream) == 0 then return 0 end
  local list = redis.pcall('XINFO', 'CONSUMERS', k.stream, GROUP)
  if type(list) ~= 'table' or list.err then return 0 end -- no group yet: no consumers
  local removed = 0
  for _, c in ipairs(list) do
    if removed >= CONSUMER_CLEANUP_LIMIT then break end
    local h = {}
    for i = 1, #c, 2 do h[c[i]] = c[i + 1] end
    if h.name ~= keep and toInt(h.pending, 0) == 0 and toInt(h.idle, 0) > idleMs then
      if not dry then
        redis.call('XGROUP', 'DELCONSUMER', k.stream, GROUP, h.name)
        -- wake entries carry no job: whatever this consumer holds there may go with it
        if redis.call('EXISTS', k.wake) == 1 then redis.pcall('XGROUP', 'DELCONSUMER', k.wake, GROUP, h.name) end
        REMOVAL_RECORDS.forget(k, h.name)
      end
      removed = removed + 1
    end
  end
  return removed
end
end
