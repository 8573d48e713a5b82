--[[ broadcast.lua — one stream, one consumer group per subscription.
  A broadcast's messages are entries of `<prefix>:{<name>}:broadcast` (fields subject, data, ts).
  Entries are never XDEL'd after processing: every subscription is a consumer group with its own
  read position and pending list, and publish trims the oldest entries (XADD MAXLEN = maxMessages,
  exact), whether or not a subscription has read them. A subscription's claim on a message is its
  pending entry; per-(subscription, message) state is the hash `<stream>:sub:<subscription>` with
  fields n:<entryId> (fence, +1 at every claim), a:<entryId> (attempts made), s:<entryId> (stalls),
  deleted when the message is done. A failed attempt with attempts left stays pending and waits in
  `<stream>:sub:<s>:retry` (zset, due ms); a message given up on is acked and recorded in the
  capped stream `<stream>:sub:<s>:dead`. Nothing here touches another subscription's group or keys.

  KEYS[1] of every function is the broadcast's meta key `<stream>:meta`.
  glidemq_bcPublish    ARGV now, maxMessages (0 = no cap), subject, data. Returns the entry id.
  glidemq_bcSubscribe  ARGV subscription, start ('$' new messages | '0' all kept | an entry id),
                       subjects (JSON text, informational), now. Returns 1 created, 0 existed (its
                       position is kept: a restarted subscription resumes where it was).
  glidemq_bcActivate   ARGV subscription, consumer, nRun, nRun entry ids to run, then ids to skip
                       (delivered to consumer but outside its subject filter: acked).
                       Returns per run entry {id, fence, attemptsMade, stalledCount}, for the
                       entries still pending for this consumer.
  glidemq_bcFinish     ARGV subscription, consumer, entryId, fence, now, outcome (completed|failed),
                       reason, retryDelay (ms, -1 = no retry), maxAttempts.
                       Returns 'completed' | 'retrying' | 'failed' | 'stale' (claim lost: no change).
  glidemq_bcRetries    ARGV subscription, consumer, now, count. Claims retries that are due.
                       Returns {nextDue (-1 = none), entry1, ...}; entry = {id, fence, attemptsMade,
                       stalledCount, subject, data, ts}.
  glidemq_bcReclaim    ARGV subscription, consumer, now, minIdle, maxStalledCount, count.
                       XAUTOCLAIMs entries idle longer than minIdle; each is a stall: run again by
                       this consumer, or given up once stalls exceed maxStalledCount.
                       Returns {entries, failedIds} with entries shaped as for bcRetries.
  glidemq_bcExtend     ARGV subscription, consumer, then pairs (entryId, fence). Resets the idle
                       time of claims this consumer still holds. Returns the ids it lost.
  glidemq_bcRemoveIdleConsumer  ARGV subscription, consumer. Deletes the consumer if it holds
                       nothing. Returns 1 deleted, 0 not.
  Errors: ERR_INVALID (bad subject, outcome or start id), ERR_NO_SUBSCRIPTION (no such group).
]]
local DEAD_MAXLEN = 1000
local RETRY_SCAN = 100

local function bcKeys(metaKey, sub)
  local stream = string.sub(metaKey, 1, #metaKey - 5) -- strip ':meta'
  local b = { meta = metaKey, stream = stream }
  if sub then
    b.sub = stream .. ':sub:' .. sub
    b.retry = b.sub .. ':retry'
    b.dead = b.sub .. ':dead'
  end
  return b
end

local function bcForget(b, sid)
  redis.call('HDEL', b.sub, 'n:' .. sid, 'a:' .. sid, 's:' .. sid)
  redis.call('ZREM', b.retry, sid)
end

-- The consumer a pending entry belongs to, or nil when it is not pending in the subscription.
local function bcOwner(b, group, sid)
  local p = redis.call('XPENDING', b.stream, group, sid, sid, 1)
  return p[1] and p[1][2] or nil
end

local function bcClaimed(b, sid)
  local fence = redis.call('HINCRBY', b.sub, 'n:' .. sid, 1)
  local f = redis.call('HMGET', b.sub, 'a:' .. sid, 's:' .. sid)
  return fence, toInt(f[1], 0), toInt(f[2], 0)
end

-- {id, fence, attemptsMade, stalledCount, subject, data, ts} for an entry's field list.
local function bcEntry(b, sid, fields)
  local fence, made, stalled = bcClaimed(b, sid)
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
  redis.call('XADD', b.dead, 'MAXLEN', '~', DEAD_MAXLEN, '*', 'id', sid, 'subject', subject, 'reason', reason, 'attempts', made)
end

local function bcGroupExists(b, group)
  if redis.call('EXISTS', b.stream) == 0 then return false end
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', b.stream)) do
    for i = 1, #g, 2 do if g[i] == 'name' and g[i + 1] == group then return true end end
  end
  return false
end

local function noSubscription(b, group)
  return fail('ERR_NO_SUBSCRIPTION', 'subscription ' .. group .. ' does not exist on ' .. b.stream ..
    ' (a BroadcastWorker creates it when it starts)')
end

redis.register_function('glidemq_bcPublish', function(keys, args)
  local b = bcKeys(keys[1])
  local now, maxMessages, subject, data = toInt(args[1], 0), toInt(args[2], 0), args[3], args[4]
  if not subject or subject == '' or string.find(subject, '[%s%*>]') then
    return fail('ERR_INVALID', 'subject must be non-empty, without whitespace or wildcards, got ' .. tostring(subject))
  end
  if maxMessages < 0 then return fail('ERR_INVALID', 'maxMessages must be >= 0') end
  if redis.call('EXISTS', b.meta) == 0 then redis.call('HSET', b.meta, 'createdAt', now) end
  if maxMessages > 0 then
    redis.call('HSET', b.meta, 'maxMessages', maxMessages)
    return redis.call('XADD', b.stream, 'MAXLEN', '=', maxMessages, '*', 'subject', subject, 'data', data, 'ts', now)
  end
  return redis.call('XADD', b.stream, '*', 'subject', subject, 'data', data, 'ts', now)
end)

redis.register_function('glidemq_bcSubscribe', function(keys, args)
  local group, start = args[1], args[2]
  local b = bcKeys(keys[1], group)
  if start ~= '$' and start ~= '0' and not string.match(start, '^%d+%-?%d*$') then
    return fail('ERR_INVALID', 'subscription start must be "$", "0" or an entry id, got ' .. tostring(start))
  end
  local ok = redis.pcall('XGROUP', 'CREATE', b.stream, group, start, 'MKSTREAM')
  if type(ok) == 'table' and ok.err then
    if string.find(ok.err, 'BUSYGROUP') then
      redis.call('HSET', b.sub, 'subjects', args[3])
      return 0
    end
    return fail('ERR_INVALID', 'cannot create subscription ' .. group .. ': ' .. ok.err)
  end
  if redis.call('EXISTS', b.meta) == 0 then redis.call('HSET', b.meta, 'createdAt', args[4]) end
  redis.call('HSET', b.sub, 'subjects', args[3], 'createdAt', args[4])
  return 1
end)

redis.register_function('glidemq_bcActivate', function(keys, args)
  local group, consumer, nRun = args[1], args[2], toInt(args[3], 0)
  local b = bcKeys(keys[1], group)
  local out = {}
  for i = 4, 3 + nRun do
    local sid = args[i]
    if bcOwner(b, group, sid) == consumer then
      local fence, made, stalled = bcClaimed(b, sid)
      out[#out + 1] = { sid, fence, made, stalled }
    end
  end
  for i = 4 + nRun, #args do
    if bcOwner(b, group, args[i]) == consumer then
      redis.call('XACK', b.stream, group, args[i])
      bcForget(b, args[i])
    end
  end
  return out
end)

redis.register_function('glidemq_bcFinish', function(keys, args)
  local group, consumer, sid, fence = args[1], args[2], args[3], args[4]
  local now, outcome, reason = toInt(args[5], 0), args[6], args[7]
  local retryDelay, maxAttempts = toInt(args[8], -1), toInt(args[9], 1)
  if outcome ~= 'completed' and outcome ~= 'failed' then
    return fail('ERR_INVALID', 'message ' .. sid .. ': outcome must be completed or failed, got ' .. tostring(outcome))
  end
  local b = bcKeys(keys[1], group)
  if bcOwner(b, group, sid) ~= consumer or redis.call('HGET', b.sub, 'n:' .. sid) ~= fence then return 'stale' end
  if outcome == 'completed' then
    redis.call('XACK', b.stream, group, sid)
    bcForget(b, sid)
    return 'completed'
  end
  local made = redis.call('HINCRBY', b.sub, 'a:' .. sid, 1)
  if retryDelay >= 0 and made < maxAttempts then
    -- stays pending (the claim record); the fence moves so this run can no longer act on it
    redis.call('HINCRBY', b.sub, 'n:' .. sid, 1)
    redis.call('ZADD', b.retry, now + retryDelay, sid)
    return 'retrying'
  end
  bcGiveUp(b, group, sid, reason, made)
  return 'failed'
end)

redis.register_function('glidemq_bcRetries', function(keys, args)
  local group, consumer, now, count = args[1], args[2], toInt(args[3], 0), toInt(args[4], 0)
  local b = bcKeys(keys[1], group)
  local out = { -1 }
  if count > 0 then
    local due = redis.call('ZRANGEBYSCORE', b.retry, '-inf', now, 'LIMIT', 0, math.min(count, RETRY_SCAN))
    for _, sid in ipairs(due) do
      redis.call('ZREM', b.retry, sid)
      local got = redis.call('XCLAIM', b.stream, group, consumer, 0, sid)
      if got[1] and got[1][2] then
        out[#out + 1] = bcEntry(b, sid, got[1][2])
      else
        bcForget(b, sid) -- trimmed by maxMessages while it waited: nothing left to run
      end
    end
  end
  local nxt = redis.call('ZRANGE', b.retry, 0, 0, 'WITHSCORES')
  if nxt[2] then out[1] = toInt(nxt[2], -1) end
  return out
end)

redis.register_function('glidemq_bcReclaim', function(keys, args)
  local group, consumer, now = args[1], args[2], toInt(args[3], 0)
  local minIdle, maxStalled, count = toInt(args[4], 0), toInt(args[5], 1), toInt(args[6], 0)
  local b = bcKeys(keys[1], group)
  if not bcGroupExists(b, group) then return noSubscription(b, group) end
  local entries, failed = {}, {}
  if count <= 0 then return { entries, failed } end
  local cursor = redis.call('HGET', b.sub, 'reclaimCursor') or '0-0'
  local r = redis.call('XAUTOCLAIM', b.stream, group, consumer, minIdle, cursor, 'COUNT', count)
  redis.call('HSET', b.sub, 'reclaimCursor', r[1])
  for _, e in ipairs(r[2]) do
    local sid, fields = e[1], e[2]
    if not fields then
      bcForget(b, sid)
    elseif redis.call('ZSCORE', b.retry, sid) then
      -- waiting out a retry backoff, not stalled: whoever holds it, bcRetries runs it when due
    else
      local stalled = redis.call('HINCRBY', b.sub, 's:' .. sid, 1)
      if stalled > maxStalled then
        bcGiveUp(b, group, sid, 'message stalled more than maxStalledCount (' .. maxStalled .. ')',
          toInt(redis.call('HGET', b.sub, 'a:' .. sid), 0))
        failed[#failed + 1] = sid
      else
        entries[#entries + 1] = bcEntry(b, sid, fields)
      end
    end
  end
  for _, sid in ipairs(r[3] or {}) do bcForget(b, sid) end
  return { entries, failed }
end)

redis.register_function('glidemq_bcExtend', function(keys, args)
  local group, consumer = args[1], args[2]
  local b = bcKeys(keys[1], group)
  local lost = {}
  for i = 3, #args, 2 do
    local sid, fence = args[i], args[i + 1]
    if bcOwner(b, group, sid) == consumer and redis.call('HGET', b.sub, 'n:' .. sid) == fence then
      redis.call('XCLAIM', b.stream, group, consumer, 0, sid, 'JUSTID')
    else
      lost[#lost + 1] = sid
    end
  end
  return lost
end)

redis.register_function('glidemq_bcRemoveIdleConsumer', function(keys, args)
  local group, consumer = args[1], args[2]
  local b = bcKeys(keys[1], group)
  if not bcGroupExists(b, group) then return 0 end
  local held = redis.call('XPENDING', b.stream, group, '-', '+', 1, consumer)
  if #held > 0 then return 0 end
  local removed = redis.pcall('XGROUP', 'DELCONSUMER', b.stream, group, consumer)
  if type(removed) == 'table' and removed.err then return 0 end
  return 1
end)
