--[[ producers.lua — once-only adds (no registered functions here): producerCall, rememberReply.
  Why: a client re-sends a command whose reply it never got (ioredis does so on reconnect), and a
  resent glidemq_add that runs again stores a second copy of every job it adds. So each add call
  (glidemq_add or glidemq_addData, numbered together) carries the client's producer id (random,
  one per Queue object) and a call number that grows by one per call, and the function keeps the
  reply of every call the client may still resend, in one hash per producer in the queue's slot:
    <queue base>:producer:<producer id>   field <seq> = the call's reply; field 'low' = below
                                          it nothing is kept
  A call whose number is there is answered with the reply kept for it, and writes nothing: the
  caller gets the ids of the jobs the first run stored (glidemq_addData's reply is a few numbers
  however many jobs it added: its ids are kept as runs). Each call also says `answeredBelow`: the
  lowest call number whose reply the client is still waiting for. Calls below it will never be
  sent again, so their replies are dropped (a few per call). Memory is bounded three ways: a
  client's unanswered calls; at most MAX_KEPT replies per producer whatever the client says; and
  the hash expires PRODUCER_TTL_MS after the producer's last call (a client gone for that long
  will not resend). README "Delivery guarantees".
]]
local producerCall, rememberReply
do
local MAX_KEPT = 10000 -- replies kept per producer: a client may have this many calls unanswered
local MAX_CALL_SEQ = 99999999999999 -- 14 digits: Lua writes it exactly as a hash field name

-- The argument kinds of a once-only call's producer id and call numbers (seq, answeredBelow).
ARG.producer = kind("'' or a producer id (1 to 64 letters, digits, '_' or '-')", function(v)
  if v == '' or (#v <= 64 and not string.find(v, '[^%w_%-]')) then return v end
  return nil
end)
ARG.callSeq = ARG.int(0, MAX_CALL_SEQ)

-- Refuses a call of `fn` whose producer, seq and answeredBelow (decoded in `a`) do not go
-- together: a producer id with seq >= 1 and 1 <= answeredBelow <= seq, or '', 0, 0.
ARG.checkProducerCall = function(fn, a)
  if (a.producer == '') ~= (a.seq == 0) or (a.seq > 0 and (a.answeredBelow < 1 or a.answeredBelow > a.seq)) then
    refuse('ERR_INVALID', fn .. ': producer, seq and answeredBelow go together: a producer id with ' ..
      'seq >= 1 and 1 <= answeredBelow <= seq, or \'\', 0, 0 (got seq ' .. a.seq .. ', answeredBelow ' .. a.answeredBelow .. ')')
  end
end
local DROP_BATCH = 1000 -- call numbers dropped per call at most (the rest on later calls)
local PRODUCER_TTL_MS = 3600000 -- one hour after a producer's last call

-- The producer's hash, or nil for a call without a producer id ('': a caller that does not ask
-- for once-only adds); then the reply kept for call `seq` (a list as the first run returned it),
-- or nil; then the stored 'low' (nil for a new producer). Reads only; the hash's type is checked.
-- `numeric`: the reply is all numbers (glidemq_addData's); else ts, id1, created1, ... (ids are
-- strings, the rest numbers).
producerCall = function(k, producer, seq, numeric)
  if producer == '' then return nil end
  local pk = k.producerPrefix .. producer
  -- (the read answers the hash's type: a wrong type is the only error HMGET gives)
  local f = redis.pcall('HMGET', pk, seq, 'low')
  if f.err then requireKeyType(pk, 'hash') end
  local kept = nil
  if f[1] then
    -- ts id1 created1 id2 created2 ...: job ids hold no whitespace (ARG.jobId), so a space parts them
    kept = {}
    for word in string.gmatch(f[1], '%S+') do
      local i = #kept + 1
      kept[i] = (numeric or i % 2 == 1) and tonumber(word) or word
    end
  end
  return pk, kept, f[2] and tonumber(f[2]) or nil
end

-- Keeps `reply` (a flat list of numbers and job ids) for call `seq` of the producer whose hash is
-- `pk`, drops the replies below min(answeredBelow, seq - MAX_KEPT + 1) from `low` upwards (at most
-- DROP_BATCH of them), and renews the hash's expiry. `low` is what producerCall read.
rememberReply = function(pk, seq, answeredBelow, low, reply)
  -- (glidemq_add refused an answeredBelow above seq)
  local below = math.max(answeredBelow, seq - MAX_KEPT + 1)
  -- a new (or expired) producer's hash holds nothing older than what the client still waits for
  low = low or below
  if below > low then
    local stop = math.min(below, low + DROP_BATCH)
    local fields = {}
    for s = low, stop - 1 do fields[#fields + 1] = s end
    redis.call('HDEL', pk, unpack(fields))
    low = stop
  end
  redis.call('HSET', pk, seq, table.concat(reply, ' '), 'low', low)
  redis.call('PEXPIRE', pk, PRODUCER_TTL_MS)
end
end
