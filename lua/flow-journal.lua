--[[ flow-journal.lua — the journal of a flow stored in parts across hash slots (a Valkey Cluster;
  lua/flow-parts.lua describes the parts, the keys and the replay).

  glidemq_flowJournalDone — forgets a flow's journal once every part was stored.
  KEYS[1]  meta key of the queue holding the journal (the first part's KEYS[1]).
  ARGV[1]  flowId: the flow's id (the job key of its first node).
  Returns  1 when it was deleted, 0 when there was none.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a journal key holds another type).

  glidemq_flowJournalDue — journals at least minAgeMs old by the server's clock: flows a producer
  left half stored, for maintenance to roll forward. Read-only.
  KEYS[1]  meta key.
  ARGV[1]  minAgeMs: only journals written at least this many ms before the server's now.
  ARGV[2]  count: journals at most (1..10000).
  Returns  a flat list: flowId1, journal1, flowId2, journal2, ... (the oldest first).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a journal key holds another type).
]]
do
local DONE_ARGS = { 'flowId', ARG.nonEmpty }
local DUE_ARGS = { 'minAgeMs', ARG.ms, 'count', ARG.int(1, MAX_COUNT) }
local JOURNAL_KEY_TYPES = { 'flows', 'hash', 'flowsDue', 'zset' }

register('glidemq_flowJournalDone', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_flowJournalDone', args, DONE_ARGS)
  requireTypes(k, JOURNAL_KEY_TYPES)
  redis.call('ZREM', k.flowsDue, a.flowId)
  return redis.call('HDEL', k.flows, a.flowId)
end)

register('glidemq_flowJournalDue', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_flowJournalDue', args, DUE_ARGS)
  requireTypes(k, JOURNAL_KEY_TYPES)
  local out = {}
  local ids = redis.call('ZRANGEBYSCORE', k.flowsDue, '-inf', serverNow() - a.minAgeMs, 'LIMIT', 0, a.count)
  for _, id in ipairs(ids) do
    local journal = redis.call('HGET', k.flows, id)
    if journal then
      out[#out + 1] = id
      out[#out + 1] = journal
    end
  end
  return out
end, { 'no-writes' })
end
