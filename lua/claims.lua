--[[ claims.lua — glidemq_listClaims: what is claimed but not finished (for `glidemq pel`). Read-only.
  KEYS[1]  meta key.
  ARGV[1]  minIdle: ms; claims idle for less than this are left out.
  ARGV[2]  limit: entries per kind (1..10000).
  Returns  {streamItems, listItems, listTrusted (1|0)}
           streamItem: {entryId, jobId, name, consumer, idleMs, deliveries, attemptsMade, state}
             from the job stream's pending entries list (jobId '' when the entry is gone; name,
             state '' when the job hash is gone or holds another type);
           listItem: {jobId, name, consumer, idleMs, attemptsMade, src ('p'|'l'|'g')} for each member
             of list-active-ids that is an active list claim, src 'p' priority, 'l' LIFO or 'g' group.
           Every idle time is the server's: the pending entries list's for stream items, the
           server's TIME minus lockedAt for list items (0 when lockedAt lies in the future; see
           reclaim.lua), and never more than the server has served since its epoch (its start
           or promotion, lua/epoch.lua), so what `pel` shows is what stalled recovery decides on.
           listTrusted 0 means the set is not seeded or has fewer members than the counter, so the
           list part may be incomplete (heal re-seeds it).
  Errors   ERR_INVALID (minIdle, limit), ERR_WRONG_TYPE (a queue key it reads holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local LIST_CLAIMS_ARGS = { 'minIdle', ARG.ms, 'limit', ARG.int(1, MAX_COUNT) }

register('glidemq_listClaims', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_listClaims', args, LIST_CLAIMS_ARGS)
  local now = serverNow()
  -- an idle time counts from the server's epoch at most, as stalled recovery counts it
  local serving = servingFor(k.meta, now)
  local streamItems, listItems = {}, {}
  if redis.call('EXISTS', k.stream) == 1 then
    -- (no group yet: nothing is pending)
    local pend = {}
    if serving >= a.minIdle then
      pend = callUnless('NOGROUP', 'XPENDING', k.stream, GROUP, 'IDLE', a.minIdle, '-', '+', a.limit) or {}
    end
    for _, p in ipairs(pend) do
      local id = streamEntryJobId(k, p[1]) or ''
      local f = id ~= '' and jobFieldsOrNil(jobKey(k, id), 'name', 'attemptsMade', 'state') or nil
      f = f or { false, false, false }
      streamItems[#streamItems + 1] = { p[1], id, f[1] or '', p[2], math.min(p[3], serving), p[4], toInt(f[2], 0), f[3] or '' }
    end
  end
  for _, id in ipairs(redis.call('SMEMBERS', k.listActiveIds)) do
    if #listItems >= a.limit then break end
    local f = jobFieldsOrNil(jobKey(k, id), 'state', 'src', 'name', 'owner', 'lockedAt', 'attemptsMade')
    if f and isListClaim(f[1], f[2]) then
      local idle = math.min(lockAge(f[5], now), serving)
      if idle >= a.minIdle then
        listItems[#listItems + 1] = { id, f[3] or '', f[4] or '', idle, toInt(f[6], 0), f[2] }
      end
    end
  end
  return { streamItems, listItems, listActiveTrusted(k) and 1 or 0 }
end, { 'no-writes' })
end
