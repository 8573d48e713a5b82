--[[ consumer-cleanup.lua — glidemq_removeStaleConsumers (and the local stalled reclaim uses)
  Consumers of dead processes would otherwise accumulate in the group. A consumer is stale when it
  holds no pending entry on the job stream and has been idle (no read or claim attempted) longer
  than the threshold the caller passes (workers pass max(10 × stalledInterval, 3 × blockTimeout,
  60s)). At most 20 are deleted per call, from both the job stream's group and the wake stream's.
  A live worker deleted this way is recreated by its next XREADGROUP.

  glidemq_removeStaleConsumers
    KEYS[1] meta key.  ARGV: keep (consumer never deleted, '' for none), idleMs (>= 0), dryRun ('1'|'0').
    Returns the number of consumers deleted (dry run: that would be deleted).
    Errors: ERR_INVALID for a bad idleMs or dryRun.
]]
redis.register_function('glidemq_removeStaleConsumers', function(keys, args)
  local k = keysFor(keys[1])
  local keep, idleMs, dry = args[1] or '', tonumber(args[2]), args[3]
  if not idleMs or idleMs < 0 then return fail('ERR_INVALID', 'consumer idle threshold must be a number of ms >= 0') end
  if not validFlag(dry) then return fail('ERR_INVALID', "dry run flag must be '0' or '1'") end
  return removeStaleConsumers(k, keep, idleMs, dry == '1')
end)
