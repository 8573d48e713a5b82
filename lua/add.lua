--[[ add.lua — glidemq_add
  KEYS[1]  meta key of the queue.
  ARGV     now(ms), maxPayload(bytes), count, then `count` groups of 8:
           jobId ('' = next from the id counter), name, data(JSON text), delay(ms), priority
           (0 = none, else 1..2097152, lower first), lifo ('1'|'0'), attempts (>=1), opts(JSON text or '').
  Returns  a flat list: id1, created1, id2, created2, ... (created 0 = a job with that custom id
           already existed and nothing was written for it).
  Errors   ERR_INVALID (bad priority/delay/attempts/id), ERR_TOO_LARGE (payload over maxPayload).
           Every job of the call is validated before the first write: a refused call adds nothing.
]]
local FIELDS = 8

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
  end

  ensureQueue(k)
  local out = {}
  for i = 0, count - 1 do
    local o = 3 + i * FIELDS
    local id = args[o + 1]
    local created = 1
    if id == '' then
      -- custom ids may be numeric; skip counter values a custom id already took
      repeat id = tostring(redis.call('INCR', k.id)) until redis.call('EXISTS', jobKey(k, id)) == 0
    elseif redis.call('EXISTS', jobKey(k, id)) == 1 then
      created = 0
    end
    if created == 1 then
      local jk = jobKey(k, id)
      local delay, priority = toInt(args[o + 4], 0), toInt(args[o + 5], 0)
      local lifo, attempts, opts = args[o + 6] == '1', toInt(args[o + 7], 1), args[o + 8]
      redis.call('HSET', jk, 'name', args[o + 2], 'data', args[o + 3], 'ts', now)
      if priority > 0 then redis.call('HSET', jk, 'priority', priority) end
      if lifo then redis.call('HSET', jk, 'lifo', '1') end
      if attempts > 1 then redis.call('HSET', jk, 'attempts', attempts) end
      if opts ~= '' then redis.call('HSET', jk, 'opts', opts) end
      if delay > 0 then
        redis.call('HSET', jk, 'delay', delay, 'state', 'delayed')
        redis.call('ZADD', k.scheduled, now + delay, id)
      else
        enqueueReady(k, id, jk, priority, lifo)
      end
      emit(k, 'added', id)
    end
    out[#out + 1] = id
    out[#out + 1] = created
  end
  return out
end)
