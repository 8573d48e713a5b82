--[[ claims.lua — glidemq_listClaims: what is claimed but not finished (for `glidemq pel`). Read-only.
  KEYS[1]  meta key.
  ARGV     now(ms), minIdle(ms; shorter-idle claims are left out), limit (entries per kind, 1..10000).
  Returns  {streamItems, listItems, listTrusted (1|0)}
           streamItem: {entryId, jobId, name, consumer, idleMs, deliveries, attemptsMade, state}
             from the job stream's pending entries list (jobId '' when the entry is gone);
           listItem: {jobId, name, consumer, idleMs, attemptsMade, src ('p'|'l'|'g')} for each member
             of list-active-ids that is an active list claim, src 'p' priority, 'l' LIFO or 'g' group
             (idle = now - lockedAt).
           listTrusted 0 means the set is not seeded or has fewer members than the counter, so the
           list part may be incomplete (heal re-seeds it).
  Errors   ERR_INVALID for a bad minIdle or limit.
]]
redis.register_function{
  function_name = 'glidemq_listClaims',
  flags = { 'no-writes' },
  callback = function(keys, args)
    local k = keysFor(keys[1])
    local now, minIdle, limit = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
    if not now then return fail('ERR_INVALID', 'now must be a time in ms') end
    if not minIdle or minIdle < 0 then return fail('ERR_INVALID', 'minimum idle time must be a number of ms >= 0') end
    if not limit or limit < 1 or limit > 10000 then return fail('ERR_INVALID', 'limit must be from 1 to 10000') end
    local streamItems, listItems = {}, {}
    if redis.call('EXISTS', k.stream) == 1 then
      local ok, pend = pcall(redis.call, 'XPENDING', k.stream, GROUP, 'IDLE', minIdle, '-', '+', limit)
      if ok then
        for _, p in ipairs(pend) do
          local e = redis.call('XRANGE', k.stream, p[1], p[1])
          local id = ''
          if e[1] then
            local fields = e[1][2]
            for i = 1, #fields, 2 do
              if fields[i] == 'id' then id = fields[i + 1] end
            end
          end
          local f = { false, false, false }
          if id ~= '' then f = redis.call('HMGET', jobKey(k, id), 'name', 'attemptsMade', 'state') end
          streamItems[#streamItems + 1] = { p[1], id, f[1] or '', p[2], p[3], p[4], toInt(f[2], 0), f[3] or '' }
        end
      end
    end
    for _, id in ipairs(redis.call('SMEMBERS', k.listActiveIds)) do
      if #listItems >= limit then break end
      local f = redis.call('HMGET', jobKey(k, id), 'state', 'src', 'name', 'owner', 'lockedAt', 'attemptsMade')
      if isListClaim(f[1], f[2]) then
        local idle = now - toInt(f[5], 0)
        if idle < 0 then idle = 0 end
        if idle >= minIdle then
          listItems[#listItems + 1] = { id, f[3] or '', f[4] or '', idle, toInt(f[6], 0), f[2] }
        end
      end
    end
    return { streamItems, listItems, listActiveTrusted(k) and 1 or 0 }
  end,
}
