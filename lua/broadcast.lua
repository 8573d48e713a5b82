--[[ broadcast.lua — glidemq_bcPublish, glidemq_bcSubscribe, glidemq_bcActivate, glidemq_bcFinish,
  glidemq_bcRetries, glidemq_bcReclaim, glidemq_bcExtend,
  glidemq_bcRemoveIdleConsumer, glidemq_bcSubscriptions
  One stream, one consumer group per subscription.
  A broadcast's messages are entries of `<prefix>:{<name>}:broadcast` (fields subject, data, ts, n:
  n is the message's number, 1, 2, 3, ... from the meta hash's `published` counter, so how many
  kept messages lie after a position is a subtraction, not a walk; see glidemq_bcSubscriptions).
  Entries are never XDEL'd after processing: every subscription is a consumer group with its own
  read position and pending list, and publish trims the oldest entries (XADD MAXLEN = maxMessages,
  exact), whether or not a subscription has read them. A subscription's claim on a message is its
  pending entry; per-(subscription, message) state is the hash `<stream>:sub:<subscription>` with
  fields n:<entryId> (fence, +1 at every claim), a:<entryId> (attempts made), s:<entryId> (stalls),
  l:<entryId> (the claim's terms: '<lockMs>:<maxStalledCount>' of the worker it was made for),
  deleted when the message is done; and lockFloor, the shortest lock any claim of the subscription
  was made with (it only falls). A claim is judged stalled by its own terms (glidemq_bcReclaim),
  never by the settings of the worker that checks. A message given up on, by its processor's last
  failed attempt or by a stalled check, goes through one path (bcGiveUp: acked, its state
  dropped, recorded in the dead-letter stream with its reason). A failed attempt with attempts left stays pending and waits in
  `<stream>:sub:<s>:retry` (zset, due ms); a message given up on is acked and recorded in the
  capped stream `<stream>:sub:<s>:dead`. Nothing here touches another subscription's group or keys.
  Once-only publish: a client re-sends a call whose reply it lost (ioredis does so on reconnect),
  and a re-run publish would store the message twice, so every subscription would run it twice.
  So, as glidemq_add does (lua/producers.lua), a publish names its producer (one per Broadcast
  object) and call number, and the reply of each call the client may still re-send is kept in the
  hash `<stream>:producer:<producer id>`: a call number already run gets the first run's reply and
  writes nothing.
  Time: a message's ts, createdAt, retry due times and the idle time that makes a claim stalled are
  the server's (TIME, and the pending entries list's own idle times); no caller's clock is used. A
  wait a worker needs (the next due retry) is returned relative, in ms from the server's now.
  Checks: every function decodes all its arguments (args.lua) and checks the type of every key it
  writes, and that the subscription exists where it needs one, before its first write; a refused
  call changes nothing.

  glidemq_bcPublish — adds a message for every subscription, once per call number.
    KEYS[1]  meta key of the broadcast (`<stream>:meta`).
    ARGV[1]  maxMessages: messages kept (each publish trims the oldest beyond it; 0 = no cap).
    ARGV[2]  producer: '' (the call may run twice if resent) or the client's producer id (1..64
             letters, digits, '_' or '-'): a call already run is answered as the first time and
             writes nothing (lua/producers.lua).
    ARGV[3]  seq: the call's number for this producer (1..99999999999999; 0 without a producer).
    ARGV[4]  answeredBelow: the lowest call number whose reply the producer still waits for
             (1..seq; 0 without a producer): replies below it are dropped.
    ARGV[5]  subject: dot-separated tokens, no whitespace, no wildcards ('*', '>'), no empty token.
    ARGV[6]  data: the message data (JSON text; its size is checked by the client).
    Returns  {ts, id}: the server time (ms) stored as the message's ts, and its entry id. A
             repeated call (same producer and seq) gets the first run's reply.
    Errors   ERR_INVALID (an argument, or producer, seq and answeredBelow that do not go together),
             ERR_WRONG_TYPE (the stream, meta or producer key holds another type).

  glidemq_bcSubscribe — creates a subscription (its consumer group) unless it exists.
    KEYS[1]  meta key of the broadcast.
    ARGV[1]  subscription: its name (no '{', '}', ':', '*', '?', '[', ']', whitespace).
    ARGV[2]  start: where a new subscription starts: '$' new messages, '0' every kept message, or an
             entry id.
    ARGV[3]  subjects: its subject filters as a JSON array of strings (informational).
    Returns  1 created, 0 existed (its position is kept: a restarted subscription resumes where it was).
             A new group's entries-read counter is set (ENTRIESREAD) to the messages published
             before its start, so the server counts exactly what was published after its position
             and not delivered to it (glidemq_bcSubscriptions: trimmedUnread).
    Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_bcActivate — claims delivered entries for a run, or acks those outside the subject filter.
    KEYS[1]  meta key of the broadcast.
    ARGV[1]  subscription: the subscription's name.
    ARGV[2]  consumer: the worker's consumer name in the subscription's group.
    ARGV[3]  lockMs: the worker's lockDuration in ms, recorded with each claim (its terms).
    ARGV[4]  maxStalledCount: the worker's maxStalledCount, recorded with each claim.
    ARGV[5]  count: how many entries follow (0..10000), each as two arguments:
      group.entryId: a stream entry id delivered to the consumer.
      group.run: '1' to run it (a new fence is taken), '0' to skip it (acked, its state dropped).
    Returns  per entry to run that is still pending for this consumer: {id, fence, attemptsMade,
             stalledCount}. An entry named twice counts once.
    Errors   ERR_INVALID, ERR_WRONG_TYPE, ERR_NO_SUBSCRIPTION (no such subscription).

  glidemq_bcFinish — records the outcome of one run.
    KEYS[1]  meta key of the broadcast.
    ARGV[1]  subscription: the subscription's name.
    ARGV[2]  consumer: the worker's consumer name.
    ARGV[3]  entryId: the message's entry id.
    ARGV[4]  fence: the fence its claim got (bcActivate, bcRetries, bcReclaim).
    ARGV[5]  outcome: completed | failed.
    ARGV[6]  reason: the failure reason (kept when the message is given up on).
    ARGV[7]  retryDelay: ms until a failed message runs again, from the server's now (-1 = no retry).
    ARGV[8]  maxAttempts: attempts the subscription gives a message (>= 1).
    Returns  'completed' | 'retrying' | 'failed' | 'stale' (claim lost: no change).
    Errors   ERR_INVALID, ERR_WRONG_TYPE, ERR_NO_SUBSCRIPTION.

  glidemq_bcRetries — claims retries that are due (by the server's clock).
    KEYS[1]  meta key of the broadcast.
    ARGV[1]  subscription: the subscription's name.
    ARGV[2]  consumer: the worker's consumer name (it takes the claims).
    ARGV[3]  count: most retries to claim (0..10000; at most 100 are looked at per call).
    ARGV[4]  lockMs: the worker's lockDuration in ms, recorded with each claim (its terms).
    ARGV[5]  maxStalledCount: the worker's maxStalledCount, recorded with each claim.
    Returns  {nextDueIn, entry1, ...}: nextDueIn is how many ms from the server's now the earliest
             waiting retry is due (0 = now, -1 = none); entry = {id, fence, attemptsMade,
             stalledCount, subject, data, ts}.
    Errors   ERR_INVALID, ERR_WRONG_TYPE, ERR_NO_SUBSCRIPTION.

  glidemq_bcReclaim — takes over stalled claims of the subscription.
    KEYS[1]  meta key of the broadcast.
    ARGV[1]  subscription: the subscription's name.
    ARGV[2]  consumer: the worker's consumer name (it takes the claims).
    ARGV[3]  minIdle: the worker's lockDuration in ms: the terms of the claims this call makes,
             and the lock of a claim that has none recorded (made by an older glidemq).
    ARGV[4]  maxStalledCount: the worker's maxStalledCount, used the same two ways (>= 0).
    ARGV[5]  count: most entries to take per call (0..10000).
             Looks at up to BC.reclaimScan pending entries from where the last call stopped, those
             idle at least the subscription's lockFloor (or minIdle if shorter); an entry whose
             idle time (the server's) reached its own claim's lock, and that is not waiting out a
             retry backoff, is a stall: XCLAIMed by this consumer and run again, or given up once
             its stalls exceed its claim's maxStalledCount. Nothing is stalled until the server
             has served that lock since its start or promotion (lua/epoch.lua: the epoch is
             recorded in the meta hash), so an outage is never counted against a claim.
    Returns  {entries, failedIds, failedEntries}: entries shaped as for bcRetries; failedEntries,
             one per failed id, {id, reason, attemptsMade, stalledCount, subject, data, ts} (the
             message given up, for the checking worker's 'failed' event).
    Errors   ERR_INVALID, ERR_WRONG_TYPE, ERR_NO_SUBSCRIPTION.

  glidemq_bcExtend — resets the idle time of claims this consumer still holds (heartbeat).
    KEYS[1]  meta key of the broadcast.
    ARGV[1]  subscription: the subscription's name.
    ARGV[2]  consumer: the worker's consumer name.
    ARGV[3]  count: how many claims follow (0..10000), each as two arguments:
      group.entryId: the message's entry id.
      group.fence: the fence its claim got.
    Returns  the ids of the claims it no longer holds.
    Errors   ERR_INVALID, ERR_WRONG_TYPE, ERR_NO_SUBSCRIPTION.

  glidemq_bcRemoveIdleConsumer — deletes a consumer that holds nothing (a worker that closed).
    KEYS[1]  meta key of the broadcast.
    ARGV[1]  subscription: the subscription's name.
    ARGV[2]  consumer: the consumer name.
    Returns  1 deleted, 0 not (it holds claims, or there is no such subscription or consumer).
    Errors   ERR_INVALID, ERR_WRONG_TYPE.

  glidemq_bcSubscriptions — where each subscription is, read in one atomic step. Read-only.
    KEYS[1]  meta key of the broadcast.
    ARGV     none.
    Returns  per subscription {name, lastDeliveredId, pending, consumers, lag, trimmedUnread}:
             lag = kept messages after its read position (not yet delivered to it);
             trimmedUnread = messages published after its position (its start, for a new one)
             that maxMessages trimmed before it read them: it never gets them. -1 = the server
             cannot tell. ({} when the stream does not exist.)
             Why not XINFO GROUPS' own lag: the group's entries-read counter counts deliveries,
             so messages trimmed before a delivery stay in its lag forever (100 published, 10
             kept, all 10 read: lag 84). Its lag is in fact lag + trimmedUnread whenever the
             group's counter is valid (glidemq_bcSubscribe starts it valid; a group created
             otherwise gets it once it reads the newest message). lag itself comes from the
             messages' numbers (field n): n(last) - n(first message after the position) + 1,
             when the kept messages are numbered without gaps (the check: n(last) - n(first)
             + 1 = length, and no entry was XDEL'd after the position); otherwise by counting
             up to BC.lagScan entries (more than that: -1). O(subscriptions × log(length)).
    Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (the stream key holds another type).
]]
-- Everything below is this file's own, inside one block (the main chunk may hold at most 200 locals).
do
-- Limits, and the argument kinds only broadcasts use (see args.lua for the others).
-- lagScan: entries glidemq_bcSubscriptions counts one by one at most (when the numbers cannot be
-- trusted); maxCallSeq: 14 digits, so Lua writes a call number exactly as a hash field name.
local BC = { deadMaxlen = 1000, retryScan = 100, reclaimScan = 1000, lagScan = 1000, maxCallSeq = 99999999999999 }
-- a run of digits within an unsigned 64-bit number (a part of a stream id)
-- an entry id as XADD makes them: <ms>-<seq>, each part a 64-bit unsigned number
BC.subscription = kind('a subscription name (1 to 600 bytes, no "{", "}", ":", "*", "?", "[", "]", ' ..
  'whitespace or control characters)', function(v)
  if v ~= '' and #v <= 600 and not string.find(v, '[{}:%*%?%[%]%s%c]') then return v end
  return nil
end)
BC.subject = kind('a subject (1 to 1536 bytes of dot-separated tokens, no whitespace, control characters, ' ..
  '"*" or ">", no empty token)', function(v)
  if v ~= '' and #v <= 1536 and not string.find(v, '[%s%c%*>]') and not string.find(v, '^%.')
    and not string.find(v, '%.$') and not string.find(v, '%.%.') then return v end
  return nil
end)
BC.start = kind('"$", "0" or a stream entry id', function(v)
  if v == '$' or v == '0' then return v end
  local ms, seq = string.match(v, '^(%d+)%-?(%d*)$')
  if ms and fitsUint64(ms) and (seq == '' or fitsUint64(seq)) and (seq ~= '' or not string.find(v, '-', 1, true)) then
    return v
  end
  return nil
end)
BC.subjects = kind('a JSON array of subject filters (strings)', function(v)
  local ok, t = pcall(cjson.decode, v)
  if not ok or type(t) ~= 'table' then return nil end
  local n = 0
  for key, s in pairs(t) do
    if type(key) ~= 'number' or type(s) ~= 'string' then return nil end
    n = n + 1
  end
  if n ~= #t then return nil end
  return v
end)

BC.producer = kind("'' or a producer id (1 to 64 letters, digits, '_' or '-')", function(v)
  if v == '' or (#v <= 64 and not string.find(v, '[^%w_%-]')) then return v end
  return nil
end)

local BC_PUBLISH_ARGS = { 'maxMessages', ARG.int(0, MAX_SAFE_INT), 'producer', BC.producer,
  'seq', ARG.int(0, BC.maxCallSeq), 'answeredBelow', ARG.int(0, BC.maxCallSeq), 'subject', BC.subject, 'data', ARG.any }
local BC_SUBSCRIBE_ARGS = { 'subscription', BC.subscription, 'start', BC.start, 'subjects', BC.subjects }
local BC_ACTIVATE_HEAD = { 'subscription', BC.subscription, 'consumer', ARG.nonEmpty, 'lockMs', ARG.ms,
  'maxStalledCount', ARG.int(0, MAX_SAFE_INT), 'count', ARG.count }
local BC_ACTIVATE_ENTRY = { 'entryId', ARG.streamId, 'run', ARG.flag }
local BC_FINISH_ARGS = { 'subscription', BC.subscription, 'consumer', ARG.nonEmpty, 'entryId', ARG.streamId,
  'fence', ARG.fence, 'outcome', ARG.oneOf('completed', 'failed'), 'reason', ARG.any,
  'retryDelay', ARG.int(-1, MAX_SAFE_INT), 'maxAttempts', ARG.int(1, MAX_SAFE_INT) }
local BC_RETRIES_ARGS = { 'subscription', BC.subscription, 'consumer', ARG.nonEmpty, 'count', ARG.count,
  'lockMs', ARG.ms, 'maxStalledCount', ARG.int(0, MAX_SAFE_INT) }
local BC_RECLAIM_ARGS = { 'subscription', BC.subscription, 'consumer', ARG.nonEmpty, 'minIdle', ARG.ms,
  'maxStalledCount', ARG.int(0, MAX_SAFE_INT), 'count', ARG.count }
local BC_EXTEND_HEAD = { 'subscription', BC.subscription, 'consumer', ARG.nonEmpty, 'count', ARG.count }
local BC_EXTEND_CLAIM = { 'entryId', ARG.streamId, 'fence', ARG.fence }
local BC_REMOVE_ARGS = { 'subscription', BC.subscription, 'consumer', ARG.nonEmpty }
local BC_SUBSCRIPTIONS_ARGS = {}

-- The broadcast's keys from its meta key. A meta key that is not `<stream>:meta` with a non-empty
-- stream name (say '', or 'meta') would make the stream, meta and producer keys collapse into one
-- another (a hash written at '' and then a stream at the same key): it is refused before any write.
local function bcKeys(metaKey, sub)
  if #metaKey <= 5 or string.sub(metaKey, -5) ~= ':meta' then
    refuse('ERR_INVALID', 'broadcast meta key ' .. showArg(metaKey) .. ' (KEYS[1]) must be the stream key followed by ' ..
      '":meta", with a non-empty stream key: otherwise the broadcast\'s keys collapse into one')
  end
  local stream = string.sub(metaKey, 1, #metaKey - 5) -- strip ':meta'
  -- (producerPrefix: the once-only publish hashes, read and written by lua/producers.lua)
  local b = { meta = metaKey, stream = stream, producerPrefix = stream .. ':producer:' }
  if sub then
    b.sub = stream .. ':sub:' .. sub
    b.retry = b.sub .. ':retry'
    b.dead = b.sub .. ':dead'
  end
  return b
end

local function bcForget(b, sid)
  redis.call('HDEL', b.sub, 'n:' .. sid, 'a:' .. sid, 's:' .. sid, 'l:' .. sid)
  redis.call('ZREM', b.retry, sid)
end

-- The consumer a pending entry belongs to, or nil when it is not pending in the subscription.
local function bcOwner(b, group, sid)
  local p = redis.call('XPENDING', b.stream, group, sid, sid, 1)
  return p[1] and p[1][2] or nil
end

-- True when the claim of `consumer` on `sid` still carries `fence` (a number).
local function bcHolds(b, group, consumer, sid, fence)
  return bcOwner(b, group, sid) == consumer and tonumber(redis.call('HGET', b.sub, 'n:' .. sid)) == fence
end

local function bcClaimed(b, sid)
  local fence = redis.call('HINCRBY', b.sub, 'n:' .. sid, 1)
  local f = redis.call('HMGET', b.sub, 'a:' .. sid, 's:' .. sid)
  return fence, toInt(f[1], 0), toInt(f[2], 0)
end

-- {id, fence, attemptsMade, stalledCount, subject, data, ts} for an entry's field list, claimed
-- (bcClaimed) unless `known` gives its fence, attempts made and stalls.
local function bcEntry(b, sid, fields, known)
  local fence, made, stalled
  if known then fence, made, stalled = known[1], known[2], known[3] else fence, made, stalled = bcClaimed(b, sid) end
  local out = { sid, fence, made, stalled, '', '', '' }
  for i = 1, #fields, 2 do
    local f = fields[i]
    if f == 'subject' then out[5] = fields[i + 1] elseif f == 'data' then out[6] = fields[i + 1] elseif f == 'ts' then out[7] = fields[i + 1] end
  end
  return out
end

local function bcGiveUp(b, group, sid, reason, made)
  local e = redis.call('XRANGE', b.stream, sid, sid)
  local subject = ''
  if e[1] then
    for i = 1, #e[1][2], 2 do if e[1][2][i] == 'subject' then subject = e[1][2][i + 1] end end
  end
  redis.call('XACK', b.stream, group, sid)
  bcForget(b, sid)
  redis.call('XADD', b.dead, 'MAXLEN', '~', BC.deadMaxlen, '*', 'id', sid, 'subject', subject, 'reason', reason, 'attempts', made)
end

-- Records the terms of the claims `sids` this call made (see the header) for a worker with lock
-- `lockMs` and `maxStalledCount`, in one HSET per call (a field per claim), and lowers lockFloor.
local function bcRecordTerms(b, sids, lockMs, maxStalledCount)
  if #sids == 0 then return end
  local text = string.format('%.0f:%.0f', lockMs, maxStalledCount)
  local fields = {}
  local floor = tonumber(redis.call('HGET', b.sub, 'lockFloor'))
  if not floor or lockMs < floor then fields[1], fields[2] = 'lockFloor', lockMs end
  for _, sid in ipairs(sids) do
    fields[#fields + 1], fields[#fields + 2] = 'l:' .. sid, text
    -- (unpack has a limit: a large call writes in parts)
    if #fields >= 1000 then
      redis.call('HSET', b.sub, unpack(fields))
      fields = {}
    end
  end
  if #fields > 0 then redis.call('HSET', b.sub, unpack(fields)) end
end

-- The lock and maxStalledCount of the claim on `sid` (its terms), or `lockMs` and
-- `maxStalledCount` (the caller's) for a claim with none recorded.
local function bcTermsOf(b, sid, lockMs, maxStalledCount)
  local lock, max = string.match(redis.call('HGET', b.sub, 'l:' .. sid) or '', '^(%d+):(%d+)$')
  if lock then return tonumber(lock), tonumber(max) end
  return lockMs, maxStalledCount
end

-- Whether the subscription's consumer group exists (an XPENDING of no entries: O(1)).
local function bcGroupExists(b, group)
  return callUnless('NOGROUP', 'XPENDING', b.stream, group, '-', '+', 0) ~= nil
end

--[[ Before the first write of a subscription's function: the stream, the subscription's state
  hash and retry zset (and, when `dead`, its dead-letter stream) must be absent or of their types,
  and the subscription must exist (ERR_NO_SUBSCRIPTION). ]]
local function bcRequire(fn, b, group, dead)
  requireKeyType(b.stream, 'stream')
  requireKeyType(b.sub, 'hash')
  requireKeyType(b.retry, 'zset')
  if dead then requireKeyType(b.dead, 'stream') end
  if not bcGroupExists(b, group) then
    refuse('ERR_NO_SUBSCRIPTION', fn .. ': subscription ' .. group .. ' does not exist on ' .. b.stream ..
      ' (a BroadcastWorker creates it when it starts)')
  end
end

-- Whether stream id x sorts before y (decimal parts of up to 20 digits: compared as text, by length first).
local function bcIdBefore(x, y)
  local xm, xs = string.match(x, '^(%d+)%-(%d+)$')
  local ym, ys = string.match(y, '^(%d+)%-(%d+)$')
  local function less(p, q)
    if #p ~= #q then return #p < #q end
    return p < q
  end
  if xm ~= ym then return less(xm, ym) end
  return less(xs, ys)
end

-- The number (field n, see the file's header) of an entry {id, fields}, or nil.
local function bcNumber(e)
  if not e or not e[2] then return nil end
  for i = 1, #e[2], 2 do
    if e[2][i] == 'n' then return tonumber(e[2][i + 1]) end
  end
  return nil
end

--[[ Kept messages after `pos` (a group's last-delivered-id) in the stream described by `s`
  (XINFO STREAM as a table), or -1 when it cannot be told. ]]
local function bcUnread(b, s, pos)
  local first, last = s['first-entry'], s['last-entry']
  if not first or not last or not bcIdBefore(pos, last[1]) then return 0 end
  if bcIdBefore(pos, first[1]) then return s.length end
  local after = '(' .. pos
  local deleted = s['max-deleted-entry-id']
  -- an entry XDEL'd after the position leaves a gap in the numbers: count instead
  if not deleted or not bcIdBefore(pos, deleted) then
    local firstN, lastN = bcNumber(first), bcNumber(last)
    local nextN = bcNumber(redis.call('XRANGE', b.stream, after, '+', 'COUNT', 1)[1])
    -- (a stream that still holds messages published before they were numbered: from the next one on)
    local whole = true
    if firstN then whole = lastN ~= nil and lastN - firstN + 1 == s.length end
    if lastN and nextN and whole and nextN <= lastN and lastN - nextN + 1 <= s.length then
      return lastN - nextN + 1
    end
  end
  local n = 0
  while n <= BC.lagScan do
    local page = redis.call('XRANGE', b.stream, after, '+', 'COUNT', 100)
    if #page == 0 then return n end
    n = n + #page
    after = '(' .. page[#page][1]
  end
  return -1
end

-- XINFO STREAM of an existing stream as a table (length, entries-added, first-entry, ...).
local function bcStreamInfo(b)
  local s = {}
  local info = redis.call('XINFO', 'STREAM', b.stream) -- a key of another type raises WRONGTYPE
  for i = 1, #info, 2 do s[info[i]] = info[i + 1] end
  return s
end

register('glidemq_bcPublish', function(keys, args)
  local a = decodeArgs('glidemq_bcPublish', args, BC_PUBLISH_ARGS)
  if (a.producer == '') ~= (a.seq == 0) or (a.seq > 0 and (a.answeredBelow < 1 or a.answeredBelow > a.seq)) then
    refuse('ERR_INVALID', 'glidemq_bcPublish: producer, seq and answeredBelow go together: a producer id with ' ..
      'seq >= 1 and 1 <= answeredBelow <= seq, or \'\', 0, 0 (got seq ' .. a.seq .. ', answeredBelow ' .. a.answeredBelow .. ')')
  end
  local b = bcKeys(keys[1])
  -- a call number already run: its first reply, and nothing written (reads only; checks the hash's type)
  local pk, kept, low = producerCall(b, a.producer, a.seq)
  if kept then return kept end
  requireKeyType(b.meta, 'hash')
  requireKeyType(b.stream, 'stream')
  local now = serverNow()
  -- the first write: a `published` field that is no count refuses here, before anything is written
  local n = redis.call('HINCRBY', b.meta, 'published', 1)
  redis.call('HSETNX', b.meta, 'createdAt', now)
  local id
  if a.maxMessages > 0 then
    redis.call('HSET', b.meta, 'maxMessages', a.maxMessages)
    id = redis.call('XADD', b.stream, 'MAXLEN', '=', a.maxMessages, '*', 'subject', a.subject, 'data', a.data, 'ts', now, 'n', n)
  else
    id = redis.call('XADD', b.stream, '*', 'subject', a.subject, 'data', a.data, 'ts', now, 'n', n)
  end
  local out = { now, id }
  if pk then rememberReply(pk, a.seq, a.answeredBelow, low, out) end
  return out
end)

register('glidemq_bcSubscribe', function(keys, args)
  local a = decodeArgs('glidemq_bcSubscribe', args, BC_SUBSCRIBE_ARGS)
  local group = a.subscription
  local b = bcKeys(keys[1], group)
  requireKeyType(b.meta, 'hash')
  requireKeyType(b.stream, 'stream')
  requireKeyType(b.sub, 'hash')
  local now = serverNow()
  -- The group's entries-read counter starts valid (XGROUP CREATE leaves it unknown without
  -- ENTRIESREAD): the messages published before its start, so that from then on the server's
  -- count of what was published after its position and not delivered is exact, and
  -- glidemq_bcSubscriptions can tell the trimmed-unread ones apart.
  local create = { 'XGROUP', 'CREATE', b.stream, group, a.start, 'MKSTREAM' }
  local entriesRead = 0 -- a stream MKSTREAM creates: nothing published yet
  if redis.call('EXISTS', b.stream) == 1 then
    local st = bcStreamInfo(b)
    local unread = 0
    if a.start ~= '$' then
      local pos = a.start == '0' and '0-0' or a.start
      if not string.find(pos, '-', 1, true) then pos = pos .. '-0' end
      unread = bcUnread(b, st, pos)
    end
    entriesRead = unread >= 0 and st['entries-added'] - unread or nil
  end
  if entriesRead then create[#create + 1], create[#create + 2] = 'ENTRIESREAD', entriesRead end
  -- XGROUP CREATE checks the start id before MKSTREAM creates anything: a refusal writes nothing.
  local ok = redis.pcall(unpack(create))
  if type(ok) == 'table' and ok.err then
    if not string.find(ok.err, 'BUSYGROUP') then
      refuse('ERR_INVALID', 'glidemq_bcSubscribe: cannot create subscription ' .. group .. ' at start ' ..
        a.start .. ': ' .. ok.err)
    end
    redis.call('HSET', b.sub, 'subjects', a.subjects)
    return 0
  end
  redis.call('HSETNX', b.meta, 'createdAt', now)
  redis.call('HSET', b.sub, 'subjects', a.subjects, 'createdAt', now)
  return 1
end)

register('glidemq_bcActivate', function(keys, args)
  local a, entries = decodeArgs('glidemq_bcActivate', args, BC_ACTIVATE_HEAD, BC_ACTIVATE_ENTRY, 'count')
  local group = a.subscription
  local b = bcKeys(keys[1], group)
  bcRequire('glidemq_bcActivate', b, group, false)
  -- who holds each entry is read before the first write
  local mine, seen = {}, {}
  for i, e in ipairs(entries) do
    mine[i] = not seen[e.entryId] and bcOwner(b, group, e.entryId) == a.consumer
    seen[e.entryId] = true
  end
  local out, claimed = {}, {}
  for i, e in ipairs(entries) do
    if mine[i] then
      if e.run then
        local fence, made, stalled = bcClaimed(b, e.entryId)
        out[#out + 1] = { e.entryId, fence, made, stalled }
        claimed[#claimed + 1] = e.entryId
      else
        redis.call('XACK', b.stream, group, e.entryId)
        bcForget(b, e.entryId)
      end
    end
  end
  bcRecordTerms(b, claimed, a.lockMs, a.maxStalledCount)
  return out
end)

register('glidemq_bcFinish', function(keys, args)
  local a = decodeArgs('glidemq_bcFinish', args, BC_FINISH_ARGS)
  local group, sid = a.subscription, a.entryId
  local b = bcKeys(keys[1], group)
  bcRequire('glidemq_bcFinish', b, group, true)
  if not bcHolds(b, group, a.consumer, sid, a.fence) then return 'stale' end
  local now = serverNow()
  if a.outcome == 'completed' then
    redis.call('XACK', b.stream, group, sid)
    bcForget(b, sid)
    return 'completed'
  end
  local made = redis.call('HINCRBY', b.sub, 'a:' .. sid, 1)
  if a.retryDelay >= 0 and made < a.maxAttempts then
    -- stays pending (the claim record); the fence moves so this run can no longer act on it
    redis.call('HINCRBY', b.sub, 'n:' .. sid, 1)
    redis.call('ZADD', b.retry, now + a.retryDelay, sid)
    return 'retrying'
  end
  bcGiveUp(b, group, sid, a.reason, made)
  return 'failed'
end)

register('glidemq_bcRetries', function(keys, args)
  local a = decodeArgs('glidemq_bcRetries', args, BC_RETRIES_ARGS)
  local group = a.subscription
  local b = bcKeys(keys[1], group)
  bcRequire('glidemq_bcRetries', b, group, false)
  local now = serverNow()
  local out, claimed = { -1 }, {}
  if a.count > 0 then
    local due = redis.call('ZRANGEBYSCORE', b.retry, '-inf', now, 'LIMIT', 0, math.min(a.count, BC.retryScan))
    for _, sid in ipairs(due) do
      redis.call('ZREM', b.retry, sid)
      local got = redis.call('XCLAIM', b.stream, group, a.consumer, 0, sid)
      if got[1] and got[1][2] then
        out[#out + 1] = bcEntry(b, sid, got[1][2])
        claimed[#claimed + 1] = sid
      else
        bcForget(b, sid) -- trimmed by maxMessages while it waited: nothing left to run
      end
    end
  end
  bcRecordTerms(b, claimed, a.lockMs, a.maxStalledCount)
  local nxt = redis.call('ZRANGE', b.retry, 0, 0, 'WITHSCORES')
  if nxt[2] then out[1] = math.max(0, toInt(nxt[2], now) - now) end
  return out
end)

register('glidemq_bcReclaim', function(keys, args)
  local a = decodeArgs('glidemq_bcReclaim', args, BC_RECLAIM_ARGS)
  local group = a.subscription
  local b = bcKeys(keys[1], group)
  bcRequire('glidemq_bcReclaim', b, group, true)
  requireKeyType(b.meta, 'hash')
  local entries, failed, failedEntries = {}, {}, {}
  if a.count <= 0 then return { entries, failed, failedEntries } end
  -- time the server was down or not yet primary is no claim's idle time (lua/epoch.lua)
  local serving, epoch = servingFor(b.meta, serverNow())
  recordEpoch(b.meta, epoch)
  local floor = tonumber(redis.call('HGET', b.sub, 'lockFloor'))
  if not floor or floor > a.minIdle then floor = a.minIdle end
  if serving < floor then return { entries, failed, failedEntries } end
  -- the walk's cursor (the last entry looked at), unless another program left something else there
  local cursor = redis.call('HGET', b.sub, 'reclaimCursor')
  if not cursor or not ARG.streamId.check(cursor) then cursor = '0-0' end
  local start = cursor == '0-0' and '-' or '(' .. cursor
  -- read phase: each entry idle at least the floor is judged by its own claim's terms
  local pend = redis.call('XPENDING', b.stream, group, 'IDLE', floor, start, '+', BC.reclaimScan)
  local chosen, nextCursor = {}, '0-0'
  for i, p in ipairs(pend) do
    local sid = p[1]
    -- (waiting out a retry backoff is not stalled: whoever holds it, bcRetries runs it when due)
    if not redis.call('ZSCORE', b.retry, sid) then
      local lock, max = bcTermsOf(b, sid, a.minIdle, a.maxStalledCount)
      if math.min(p[3], serving) >= lock then chosen[#chosen + 1] = { sid = sid, max = max } end
    end
    if #chosen >= a.count and i < #pend then
      nextCursor = sid
      break
    end
  end
  if nextCursor == '0-0' and #pend >= BC.reclaimScan then nextCursor = pend[#pend][1] end
  -- write phase: the chosen entries pass to this consumer (XCLAIM answers none whose message
  -- maxMessages trimmed: its state goes), each a stall
  redis.call('HSET', b.sub, 'reclaimCursor', nextCursor)
  local fieldsOf = {}
  for i = 1, #chosen, 100 do
    local ids = {}
    for j = i, math.min(i + 99, #chosen) do ids[#ids + 1] = chosen[j].sid end
    for _, e in ipairs(redis.call('XCLAIM', b.stream, group, a.consumer, 0, unpack(ids))) do
      if e[2] then fieldsOf[e[1]] = e[2] end
    end
  end
  local claimed = {}
  for _, c in ipairs(chosen) do
    local fields = fieldsOf[c.sid]
    if not fields then
      bcForget(b, c.sid)
    else
      local stalled = redis.call('HINCRBY', b.sub, 's:' .. c.sid, 1)
      if stalled > c.max then
        -- given up as a processor's last failed attempt is (bcGiveUp), and told to the checking worker
        local reason = 'message stalled more than maxStalledCount (' .. string.format('%d', c.max) .. ')'
        local made = toInt(redis.call('HGET', b.sub, 'a:' .. c.sid), 0)
        bcGiveUp(b, group, c.sid, reason, made)
        failed[#failed + 1] = c.sid
        local e = bcEntry(b, c.sid, fields, { 0, made, stalled })
        e[2] = reason
        failedEntries[#failedEntries + 1] = e
      else
        entries[#entries + 1] = bcEntry(b, c.sid, fields)
        claimed[#claimed + 1] = c.sid
      end
    end
  end
  bcRecordTerms(b, claimed, a.minIdle, a.maxStalledCount)
  return { entries, failed, failedEntries }
end)

register('glidemq_bcExtend', function(keys, args)
  local a, claims = decodeArgs('glidemq_bcExtend', args, BC_EXTEND_HEAD, BC_EXTEND_CLAIM, 'count')
  local group = a.subscription
  local b = bcKeys(keys[1], group)
  bcRequire('glidemq_bcExtend', b, group, false)
  local held, lost = {}, {}
  for _, c in ipairs(claims) do
    if bcHolds(b, group, a.consumer, c.entryId, c.fence) then
      held[#held + 1] = c.entryId
    else
      lost[#lost + 1] = c.entryId
    end
  end
  for _, sid in ipairs(held) do
    redis.call('XCLAIM', b.stream, group, a.consumer, 0, sid, 'JUSTID')
  end
  return lost
end)

register('glidemq_bcRemoveIdleConsumer', function(keys, args)
  local a = decodeArgs('glidemq_bcRemoveIdleConsumer', args, BC_REMOVE_ARGS)
  local group = a.subscription
  local b = bcKeys(keys[1], group)
  requireKeyType(b.stream, 'stream')
  if not bcGroupExists(b, group) then return 0 end
  local held = redis.call('XPENDING', b.stream, group, '-', '+', 1, a.consumer)
  if #held > 0 then return 0 end
  local removed = redis.pcall('XGROUP', 'DELCONSUMER', b.stream, group, a.consumer)
  if type(removed) == 'table' and removed.err then return 0 end
  return 1
end)

register('glidemq_bcSubscriptions', function(keys, args)
  decodeArgs('glidemq_bcSubscriptions', args, BC_SUBSCRIPTIONS_ARGS)
  local b = bcKeys(keys[1])
  if redis.call('EXISTS', b.stream) == 0 then return {} end
  local s = bcStreamInfo(b)
  local out = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', b.stream)) do
    local h = {}
    for i = 1, #g, 2 do h[g[i]] = g[i + 1] end
    local pos = h['last-delivered-id']
    local lag = bcUnread(b, s, pos)
    -- XINFO's lag is entries-added - entries-read: every message published after the group's
    -- position that it was not delivered, kept or trimmed (valid only while the group's
    -- entries-read counter is, and no entry after its position was XDEL'd)
    local trimmed = -1
    local deleted = s['max-deleted-entry-id']
    if lag >= 0 and h['entries-read'] and h.lag and (not deleted or not bcIdBefore(pos, deleted)) and h.lag >= lag then
      trimmed = h.lag - lag
    end
    out[#out + 1] = { h.name, pos, h.pending, h.consumers, lag, trimmed }
  end
  return out
end, { 'no-writes' })
end
