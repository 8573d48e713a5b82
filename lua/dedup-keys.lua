--[[ dedup-keys.lua — glidemq_removeDedupKeyOf: BullMQ's job.removeDeduplicationKey(). Forgets a
  dedup id only while it still deduplicates adds for the job that asks, so a job cannot free an id
  that a later add took over (queue.removeDeduplicationKey(id) forgets it whatever it points at).
  Whether the entry still deduplicates is judged as an add would judge it (lua/dedup.lua
  dedupEntryOver), on the server's clock.
  KEYS[1]  meta key.
  ARGV[1]  dedupId: the dedup id (1..512 bytes).
  ARGV[2]  jobId: the job that asks.
  Returns  1 when the id pointed at jobId and still deduplicated adds: it is deleted, and the next
           add with it creates a job. 0 otherwise (an entry for jobId that is over is deleted too:
           it blocks nothing).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (the dedup key holds another type).
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
local REMOVE_DEDUP_KEY_ARGS = {
  'dedupId', kind('a dedup id of 1 to ' .. DEDUP_MAX_ID_LEN .. ' bytes', function(v)
    if v ~= '' and #v <= DEDUP_MAX_ID_LEN then return v end
    return nil
  end),
  'jobId', ARG.jobId,
}
local REMOVE_DEDUP_KEY_WRITES = { 'dedup', 'hash' }

register('glidemq_removeDedupKeyOf', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_removeDedupKeyOf', args, REMOVE_DEDUP_KEY_ARGS)
  requireTypes(k, REMOVE_DEDUP_KEY_WRITES)
  local v = redis.call('HGET', k.dedup, a.dedupId)
  if not v then return 0 end
  local _, _, jobId = parseDedupEntry(v)
  if jobId ~= a.jobId then return 0 end
  local live = not dedupEntryOver(k, v, serverNow())
  redis.call('HDEL', k.dedup, a.dedupId)
  return live and 1 or 0
end)
end
