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
  Errors   ERR_INVALID (bad priority/delay/attempts/id/dedup/group), ERR_TOO_LARGE (payload over maxPayload).
           Every job of the call is validated before the first write: a refused call adds nothing.
]]
local FIELDS = 12

-- Writes a new job's hash and puts it where it waits (scheduled set, its group, or ready). Shared
-- with scheduler firing (lua/schedulers.lua). `group` is a spec checked by groupParse, or nil.
local function insertJob(k, now, id, name, data, delay, priority, lifo, attempts, opts, group)
  local jk = jobKey(k, id)
  redis.call('HSET', jk, 'name', name, 'data', data, 'ts', now)
  if priority > 0 then redis.call('HSET', jk, 'priority', priority) end
  if lifo then redis.call('HSET', jk, 'lifo', '1') end
  if attempts > 1 then redis.call('HSET', jk, 'attempts', attempts) end
  if opts ~= '' then redis.call('HSET', jk, 'opts', opts) end
  if group then
    groupConfigure(k, group, now)
    redis.call('HSET', jk, 'grp', group.id)
  end
  if delay > 0 then
    redis.call('HSET', jk, 'delay', delay, 'state', 'delayed')
    redis.call('ZADD', k.scheduled, now + delay, id)
  elseif group then
    groupEnqueue(k, id, jk, group.id)
  else
    enqueueReady(k, id, jk, priority, lifo)
  end
  emit(k, 'added', id)
end

-- The next free id from the counter (custom ids may be numeric: skip values one already took).
local function nextJobId(k)
  local id
  repeat id = tostring(redis.call('INCR', k.id)) until redis.call('EXISTS', jobKey(k, id)) == 0
  return id
end

redis.register_function('glidemq_add', function(keys, args)
  local k = keysFor(keys[1])
  local now, maxPayload, count = toInt(args[1], 0), toInt(args[2], 0), toInt(args[3], 0)
  for i = 0, count - 1 do
    local o = 3 + i * FIELDS
    local id, data = args[o + 1], args[o + 3]
    local delay, priority, attempts = tonumber(args[o + 4]), tonumber(args[o + 5]), tonumber(args[o + 7])
    local label = id ~= '' and ('job ' .. id) or ('job #' .. (i + 1) .. ' of the call')
    if maxPayload > 0 and #data > maxPayload then
      return fail('ERR_TOO_LARGE', label .. ': payload is ' .. #data .. ' bytes, over the limit of ' ..
        maxPayload .. ' bytes; store large data elsewhere and enqueue a reference')
    end
    if not delay or delay < 0 then return fail('ERR_INVALID', label .. ': delay must be >= 0') end
    if not priority or priority < 0 or priority > MAX_PRIORITY or priority ~= math.floor(priority) then
      return fail('ERR_INVALID', label .. ': priority must be a whole number from 1 to ' .. MAX_PRIORITY)
    end
    if not attempts or attempts < 1 then return fail('ERR_INVALID', label .. ': attempts must be >= 1') end
    if string.find(id, '[:%s{}]') then
      return fail('ERR_INVALID', label .. ': a job id may not contain ":", "{", "}" or whitespace')
    end
    local bad = validateDedup(label, args[o + 9] or '', tonumber(args[o + 10] or '0'), args[o + 11] or '', delay)
    if bad then return bad end
    if args[o + 12] and args[o + 12] ~= '' then
      local spec, why = groupParse(args[o + 12])
      if not spec then return fail('ERR_INVALID', label .. ': ' .. why) end
      if priority > 0 or args[o + 6] == '1' then
        return fail('ERR_INVALID', label .. ": a group job runs in its group's order: it cannot be prioritized or LIFO")
      end
    end
  end

  ensureQueue(k)
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
