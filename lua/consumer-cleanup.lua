--[[ consumer-cleanup.lua — glidemq_removeStaleConsumers (the stalled reclaim does the same, see
  stale-consumers.lua). Consumers of dead processes would otherwise accumulate in the group. A
  consumer is stale when it holds no pending entry on the job stream and has been idle (no read or
  claim attempted; the server's idle time from XINFO CONSUMERS) longer than the threshold the
  caller passes (workers pass max(10 × stalledInterval, 3 × blockTimeout, 60s)). At most 20 are
  deleted per call, from both the job stream's group and the wake stream's. A live worker deleted
  this way is recreated by its next XREADGROUP.
  KEYS[1]  meta key.
  ARGV[1]  keep: a consumer never deleted ('' for none).
  ARGV[2]  idleMs: ms a consumer holding nothing must have been idle to be deleted.
  ARGV[3]  dryRun: '1' counts and deletes nothing, '0' deletes.
  Returns  the number of consumers deleted (dry run: that would be deleted).
  Errors   ERR_INVALID (idleMs, dryRun), ERR_WRONG_TYPE (the job or wake stream, or removed-finishes,
           holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local STALE_CONSUMERS_ARGS = { 'keep', ARG.any, 'idleMs', ARG.ms, 'dryRun', ARG.flag }
local STALE_CONSUMERS_WRITES = { 'stream', 'stream', 'wake', 'stream', 'removedFinishes', 'hash' }

register('glidemq_removeStaleConsumers', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_removeStaleConsumers', args, STALE_CONSUMERS_ARGS)
  requireTypes(k, STALE_CONSUMERS_WRITES)
  return removeStaleConsumers(k, a.keep, a.idleMs, a.dryRun)
end)
end
