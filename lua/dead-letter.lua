--[[ dead-letter.lua — a queue's dead-letter queue: its setting, and the relay of the dead letters a
  cluster call left in the source queue's dead-outbox (lua/dead-letters.lua describes both).

  glidemq_setDeadLetterQueue — names (or clears) the queue's dead-letter queue, in its meta; every
  failure for good from then on, whichever client stores it, sends a dead letter there.
  KEYS[1]  meta key of the source queue.
  ARGV[1]  name: the dead-letter queue's name (same prefix), or '' for none.
  Returns  the name it replaced ('' when there was none).
  Errors   ERR_INVALID (a name that is no queue name: empty is none, at most 200 bytes, no '{',
           '}', ':', '*', '?', '[', ']' or whitespace; the queue's own name), ERR_WRONG_TYPE (meta
           holds another type).

  glidemq_storeDeadLetters — stores relayed dead letters in the dead-letter queue.
  KEYS[1]  meta key of the dead-letter queue.
  ARGV[1]  count: how many dead letters follow (1..10000), each a group of 2 arguments:
    group.id: the dead letter's job id.
    group.record: the outbox record's value, JSON {t, q, f} (lua/dead-letters.lua).
  Every record is read before the first write; a dead letter whose id exists is not stored again.
  Returns  the number of dead letters stored.
  Errors   ERR_INVALID (an argument, named with its group; a record that is not such JSON),
           ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_deadOutboxList — dead-outbox records to relay. Read-only.
  KEYS[1]  meta key of the source queue.
  ARGV[1]  minAgeMs: only records written at least this many ms before the server's now.
  ARGV[2]  count: records at most (1..10000).
  Returns  a flat list: id1, record1, id2, record2, ...
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (the outbox holds another type).

  glidemq_deadOutboxDone — forgets dead-outbox records once they were stored.
  KEYS[1]  meta key of the source queue.
  ARGV[1]  count: how many records follow (1..10000), each a group of 2 arguments:
    group.id: the record's field (the dead letter's id).
    group.record: the record's value as it was relayed (a record written again since stays).
  Returns  the number of records deleted.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (the outbox holds another type).
]]
do
local SET_ARGS = { 'name', kind("'' or a queue name (at most 200 bytes, no '{', '}', ':', '*', '?', '[', ']' or whitespace)", function(v)
  if v == '' or (#v <= 200 and not string.find(v, '[{}:%*%?%[%]%s%c]')) then return v end
  return nil
end) }
local COUNT_HEAD = { 'count', ARG.int(1, MAX_COUNT) }
local RECORD_EACH = { 'id', ARG.jobId, 'record', ARG.any }
local LIST_ARGS = { 'minAgeMs', ARG.ms, 'count', ARG.int(1, MAX_COUNT) }
local OUTBOX_TYPES = { 'deadOutbox', 'hash' }

-- A relayed record's fields and time, or a refusal naming its group.
local function readRecord(i, r)
  local ok, rec = pcall(cjson.decode, r.record)
  if not ok or type(rec) ~= 'table' or type(rec.f) ~= 'table' or #rec.f == 0 or #rec.f % 2 ~= 0 or type(rec.t) ~= 'number' then
    refuse('ERR_INVALID', 'glidemq_storeDeadLetters: group #' .. i .. ' record must be a dead-outbox record {t, q, f}, got ' ..
      showArg(r.record))
  end
  for _, v in ipairs(rec.f) do
    if type(v) ~= 'string' then
      refuse('ERR_INVALID', 'glidemq_storeDeadLetters: group #' .. i .. ' record fields must be strings')
    end
  end
  return rec
end

register('glidemq_setDeadLetterQueue', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_setDeadLetterQueue', args, SET_ARGS)
  if a.name ~= '' and a.name == string.match(k.base, '{([^{}]*)}$') then
    refuse('ERR_INVALID', 'glidemq_setDeadLetterQueue: name must be another queue than ' .. showArg(a.name) ..
      ' itself (a queue cannot be its own dead-letter queue)')
  end
  requireTypes(k, { 'meta', 'hash' })
  local old = redis.call('HGET', k.meta, FAILURE_TYPES.dead.FIELD) or ''
  if a.name == '' then
    redis.call('HDEL', k.meta, FAILURE_TYPES.dead.FIELD)
  else
    redis.call('HSET', k.meta, FAILURE_TYPES.dead.FIELD, a.name)
  end
  return old
end)

register('glidemq_storeDeadLetters', function(keys, args)
  local k = keysFor(keys[1])
  local _, records = decodeArgs('glidemq_storeDeadLetters', args, COUNT_HEAD, RECORD_EACH, 'count')
  local recs = {}
  for i, r in ipairs(records) do recs[i] = readRecord(i, r) end
  requireTypes(k, FAILURE_TYPES.dead.LETTER_TYPES)
  for _, r in ipairs(records) do requireKeyType(jobKey(k, r.id), 'hash') end
  local stored = 0
  for i, r in ipairs(records) do
    if FAILURE_TYPES.dead.store(k, r.id, recs[i].f, recs[i].t) then stored = stored + 1 end
  end
  return stored
end)

register('glidemq_deadOutboxDone', function(keys, args)
  local k = keysFor(keys[1])
  local _, records = decodeArgs('glidemq_deadOutboxDone', args, COUNT_HEAD, RECORD_EACH, 'count')
  requireTypes(k, OUTBOX_TYPES)
  return FLOW.outboxDone(k.deadOutbox, records, 'id', 'record')
end)

register('glidemq_deadOutboxList', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_deadOutboxList', args, LIST_ARGS)
  requireTypes(k, OUTBOX_TYPES)
  return FLOW.outboxList(k.deadOutbox, a.minAgeMs, a.count)
end, { 'no-writes' })
end
