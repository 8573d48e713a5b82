--[[ add.lua — glidemq_add
  KEYS[1]  meta key of the queue.
  ARGV     now(ms), maxPayload(bytes), count, then `count` groups of 11:
           jobId ('' = next from the id counter), name, data(JSON text), delay(ms), priority
           (0 = none, else 1..2097152, lower first), lifo ('1'|'0'), attempts (>=1), opts(JSON text or ''),
           dedupId ('' = none), dedupTtl (ms, 0 = none), dedupMode ('' | simple | throttle | debounce;
           see lua/dedup.lua), group (JSON {id, maxConcurrency?, rateMax?, rateDuration?, capacity?,
           refillRate?, ordered?} or '': the job waits in that group, whose settings it updates;
           see lua/group.lua).
  Returns  a flat list: id1, created1, id2, created2, ... (created 1 = added; 0 = a job with that
           custom id already existed and nothing was written for it; 2 = deduplicated: the id is
           the earlier job's and nothing was written; 3 = debounced: the id is the earlier delayed
           job's, which took this add's data and delay).
  Errors   ERR_INVALID (bad priority/delay/attempts/id/dedup/group), ERR_TOO_LARGE (payload over maxPayload),
           ERR_WRONG_TYPE (a key the call writes holds another type: another program wrote to it).
           Every job of the call is validated before the first write: a refused call adds nothing.
]]
local FIELDS = 12

-- Names job i (0-based) of a call in an error; built only when there is an error to report.
local function labelOf(id, i)
  return id ~= '' and ('job ' .. id) or ('job #' .. (i + 1) .. ' of the call')
end

redis.register_function('glidemq_add', function(keys, args)
  local k = keysFor(keys[1])
  local now, maxPayload, count = toInt(args[1], 0), toInt(args[2], 0), toInt(args[3], 0)
  for i = 0, count - 1 do
    local o = 3 + i * FIELDS
    local id, data = args[o + 1], args[o + 3]
    local delay, priority, attempts = tonumber(args[o + 4]), tonumber(args[o + 5]), tonumber(args[o + 7])
    if maxPayload > 0 and #data > maxPayload then
      return fail('ERR_TOO_LARGE', labelOf(id, i) .. ': payload is ' .. #data .. ' bytes, over the limit of ' ..
        maxPayload .. ' bytes; store large data elsewhere and enqueue a reference')
    end
    if not delay or delay < 0 then return fail('ERR_INVALID', labelOf(id, i) .. ': delay must be >= 0') end
    if not priority or priority < 0 or priority > MAX_PRIORITY or priority ~= math.floor(priority) then
      return fail('ERR_INVALID', labelOf(id, i) .. ': priority must be a whole number from 1 to ' .. MAX_PRIORITY)
    end
    if not attempts or attempts < 1 then return fail('ERR_INVALID', labelOf(id, i) .. ': attempts must be >= 1') end
    if string.find(id, '[:%s%c{}]') then
      return fail('ERR_INVALID', labelOf(id, i) .. ': a job id may not contain ":", "{", "}" , whitespace or control characters')
    end
    local dedupId, dedupMode = args[o + 9] or '', args[o + 11] or ''
    if dedupId ~= '' or dedupMode ~= '' then
      local bad = validateDedup(labelOf(id, i), dedupId, tonumber(args[o + 10] or '0'), dedupMode, delay)
      if bad then return bad end
    end
    if args[o + 12] and args[o + 12] ~= '' then
      local spec, why = groupParse(args[o + 12])
      if not spec then return fail('ERR_INVALID', labelOf(id, i) .. ': ' .. why) end
      if priority > 0 or args[o + 6] == '1' then
        return fail('ERR_INVALID', labelOf(id, i) .. ": a group job runs in its group's order: it cannot be prioritized or LIFO")
      end
    end
  end

  -- The keys written after a job's hash must be glidemq's, or a refused call would leave a
  -- half-added job. (A wrong-type meta or id key fails the first command that touches it, before
  -- any write, and the client names the key.)
  local spec = { 'events', 'stream', 'stream', 'stream' }
  local seen = {}
  for i = 0, count - 1 do
    local o = 3 + i * FIELDS
    local kind = toInt(args[o + 4], 0) > 0 and 'scheduled' or toInt(args[o + 5], 0) > 0 and 'prioritized'
      or args[o + 6] == '1' and 'lifo' or 'stream'
    if not seen[kind] then
      seen[kind] = true
      if kind == 'prioritized' or kind == 'lifo' then
        spec[#spec + 1], spec[#spec + 2] = kind, kind == 'lifo' and 'list' or 'zset'
        if not seen.wake then
          seen.wake = true
          spec[#spec + 1], spec[#spec + 2] = 'wake', 'stream'
        end
      elseif kind == 'scheduled' then
        spec[#spec + 1], spec[#spec + 2] = kind, 'zset'
      end
    end
    if (args[o + 9] or '') ~= '' and not seen.dedup then
      seen.dedup = true
      spec[#spec + 1], spec[#spec + 2] = 'dedup', 'hash'
    end
  end
  local bad = wrongType(k, spec)
  if bad then return bad end

  ensureQueue(k)
  -- Jobs that surely take an id from the counter (no custom id, no dedup) get them from one
  -- INCRBY; one that meets a job a numeric custom id created falls back to nextJobId.
  local plain = 0
  for i = 0, count - 1 do
    local o = 3 + i * FIELDS
    if args[o + 1] == '' and (args[o + 9] or '') == '' then plain = plain + 1 end
  end
  local reserved, lastReserved = 1, 0
  if plain > 1 then
    lastReserved = redis.call('INCRBY', k.id, plain)
    reserved = lastReserved - plain + 1
  end
  local out = {}
  for i = 0, count - 1 do
    local o = 3 + i * FIELDS
    local id = args[o + 1]
    local created = 1
    local dedupId, dedupTtl, dedupMode = args[o + 9], toInt(args[o + 10], 0), args[o + 11]
    local verdict, existing = 'new', nil
    if dedupId ~= '' then
      verdict, existing = applyDedup(k, now, dedupId, dedupTtl, dedupMode, args[o + 3], toInt(args[o + 4], 0))
    end
    if verdict ~= 'new' then
      id, created = existing, (verdict == 'blocked' and 2 or 3)
    elseif id == '' and dedupId == '' and reserved <= lastReserved then
      id = tostring(reserved)
      reserved = reserved + 1
      if redis.call('EXISTS', jobKey(k, id)) == 1 then id = nextJobId(k) end
    elseif id == '' then
      id = nextJobId(k)
    elseif redis.call('EXISTS', jobKey(k, id)) == 1 then
      created = 0
    end
    if created == 1 then
      local delay = toInt(args[o + 4], 0)
      insertJob(k, now, id, args[o + 2], args[o + 3], delay, toInt(args[o + 5], 0), args[o + 6] == '1',
        toInt(args[o + 7], 1), args[o + 8], args[o + 12] and args[o + 12] ~= '' and groupParse(args[o + 12]) or nil)
      if dedupId ~= '' then recordDedup(k, now, dedupId, dedupTtl, dedupMode, delay, id) end
    end
    out[#out + 1] = id
    out[#out + 1] = created
  end
  return out
end)
