--[[ own-claims.lua — glidemq_ownClaims, glidemq_adopt: a worker takes back the claims its
  consumer holds but it does not know, because the reply that carried them was lost.
  Why: glidemq_finish, glidemq_fetch and glidemq_activate claim jobs in the call that answers
  with them, and a blocking XREADGROUP delivers entries in the read that answers with them. When
  such a reply is lost (the connection broke after the server ran the call), ioredis re-sends the
  call, which claims or delivers other jobs; the first run's claims stay with the consumer and
  nobody runs them, until stalled recovery takes them after the lock duration and counts a stall
  for a job that never ran. So a worker that reconnects lists what its consumer holds
  (glidemq_ownClaims) and takes back what it does not know: active claims with glidemq_adopt
  (the same claim and fence, its lock renewed), and entries delivered to it that were never
  activated with glidemq_activate (lua/fetch.lua).

  glidemq_ownClaims (read-only)
  KEYS[1]  meta key.
  ARGV[1]  consumer: the worker's consumer name.
  ARGV[2]  limit: job stream entries, and list claims, looked at (1..10000 of each).
  Returns  a flat list of triples jobId, fence, entryId: an active claim of `consumer` (entryId ''
           for a priority, LIFO or group claim); or, with fence '', a job stream entry delivered to
           `consumer` whose job still waits for it (a blocking read whose reply was lost).
  Errors   ERR_INVALID (an argument).

  glidemq_adopt
  KEYS[1]  meta key.
  ARGV[1]  consumer: the worker's consumer name.
  ARGV[2]  count: the claims named (0..10000); `count` groups of 2 arguments follow, each:
    group.jobId: a job glidemq_ownClaims listed as an active claim.
    group.fence: its fence as listed.
  Returns  the claim replies (lua/activate.lua) of the jobs still active for `consumer` with that
           fence, in argument order, whose lock it renews (lockedAt = the server's TIME); the
           others (finished, reclaimed, removed since) are left out. A repeated call answers
           the same claims again.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a job key holds another type). Every job is
           read before the first write.
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local OWN_CLAIMS_ARGS = { 'consumer', ARG.nonEmpty, 'limit', ARG.int(1, MAX_COUNT) }
local ADOPT_HEAD = { 'consumer', ARG.nonEmpty, 'count', ARG.count }
local ADOPT_CLAIM = { 'jobId', ARG.jobId, 'fence', ARG.fence }

register('glidemq_ownClaims', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_ownClaims', args, OWN_CLAIMS_ARGS)
  local out = {}
  local function add(id, fence, sid)
    local n = #out
    out[n + 1], out[n + 2], out[n + 3] = id, fence, sid
  end
  if redis.call('EXISTS', k.stream) == 1 then
    -- (no consumer group: nothing was ever delivered)
    local pending = callUnless('NOGROUP', 'XPENDING', k.stream, GROUP, '-', '+', a.limit, a.consumer) or {}
    for _, p in ipairs(pending) do
      local sid = p[1]
      local id = streamEntryJobId(k, sid)
      local f = id and jobFieldsOrNil(jobKey(k, id), 'state', 'fence', 'owner', 'sid')
      if f and f[4] == sid then
        if f[1] == 'active' and f[3] == a.consumer then
          add(id, f[2] or '0', sid)
        elseif f[1] == 'waiting' then
          add(id, '', sid)
        end
      end
    end
  end
  local seen = 0
  for _, id in ipairs(redis.call('SMEMBERS', k.listActiveIds)) do
    seen = seen + 1
    if seen > a.limit then break end
    local f = jobFieldsOrNil(jobKey(k, id), 'state', 'src', 'owner', 'fence')
    if f and isListClaim(f[1], f[2]) and f[3] == a.consumer then add(id, f[4] or '0', '') end
  end
  return out
end, { 'no-writes' })

register('glidemq_adopt', function(keys, args)
  local k = keysFor(keys[1])
  local a, claims = decodeArgs('glidemq_adopt', args, ADOPT_HEAD, ADOPT_CLAIM, 'count')
  local now = serverNow()
  -- check phase: every job is read (a job key of another type raises here, before any write)
  local held = {}
  for _, c in ipairs(claims) do
    local jk = jobKey(k, c.jobId)
    local reply, fence, state, _, owner = claimReply(c.jobId, redis.call('HGETALL', jk))
    if state == 'active' and owner == a.consumer and fence == c.fence then
      held[#held + 1] = { jk, reply, fence }
    end
  end
  -- write phase: the claims stay as they are; only their locks are renewed
  local out = {}
  for i, h in ipairs(held) do out[i] = handOverAgain(h[1], h[2], h[3], now) end
  return out
end)
end
