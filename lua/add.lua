--[[ add.lua — adding jobs: glidemq_add (any jobs, each with its own options) and the bulk
  path glidemq_addData (many jobs that share every option, differing only in their data).
  glidemq_add — adds jobs (one, or a bulk of them in one call).
  KEYS[1]  meta key of the queue.
  ARGV[1]  maxPayload: largest accepted data, in bytes (0 = no limit).
  ARGV[2]  producer: '' (the call may run twice if resent) or the client's producer id (1..64
           letters, digits, '_' or '-'): a call already run is answered as the first time and
           writes nothing (lua/producers.lua).
  ARGV[3]  seq: the call's number for this producer (1..99999999999999; 0 without a producer).
  ARGV[4]  answeredBelow: the lowest call number whose reply the producer still waits for
           (1..seq; 0 without a producer): replies below it are dropped.
  ARGV[5]  count: how many jobs the call adds (0..10000); `count` groups of 12 arguments follow,
           one per job, each:
    group.jobId: '' (the next id from the counter) or a custom id (1..256 bytes, no ':', '{', '}',
           whitespace or control characters, not a whole number such as '2' or '-1': those are
           the counter's ids).
    group.name: the job's name (1..1024 bytes).
    group.data: the job's data (JSON text, at most maxPayload bytes).
    group.delay: ms to wait before it may run (0 = none), counted from the server's clock.
    group.priority: 0 = none, else 1..2097152 (lower runs first).
    group.lifo: '1' last in, first out; '0' not.
    group.attempts: attempts before it fails for good (>= 1).
    group.opts: '' or a JSON object of the options only clients read (backoff, retention, keepLogs,
           timestamp), each within the range the calls that read it take (lua/jobs.lua JOB_OPTS).
    group.dedupId: '' = no dedup, else the dedup id (1..512 bytes; see lua/dedup.lua).
    group.dedupTtl: ms the dedup window lasts (0 = no end, at most 315576000000 = 10 years; needs
           a dedupId).
    group.dedupMode: '' (no dedup) | simple | throttle | extend | debounce (needed with a dedupId).
    group.groupSpec: '' or the job's group as a JSON object {id, maxConcurrency?, rateMax?,
           rateDuration?, capacity?, refillRate?, ordered?}: the job waits in that group, whose
           settings it updates (see lua/group.lua). A delayed job of an ordered group takes its
           place in the group's line when it is added and holds it through its delay: a job
           added after it to the same group starts only once it has run.
  Time: the job's ts, its due time (delay), dedup windows and group token buckets all count from
  the server's TIME, read once per call; no caller's clock is used.
  Ids: a call that takes ids from the counter first moves it on once per server epoch (a new
  server process or a promotion; lua/jobs.lua guardIdCounter), so an id a crash took back is
  never handed out again.
  Returns  a flat list: ts, id1, created1, id2, created2, ...: ts is the server time (ms) stored as
           the ts of the jobs the call created; created 1 = added; 0 = a job with that custom id
           already existed and nothing was written for it but the event 'duplicated'; 2 =
           deduplicated: the id is the earlier job's and nothing was written but the event
           'deduplicated'; 3 = debounced: the id is the earlier delayed job's, which took this
           add's data and delay. An add with a dedup id and no custom id takes an id from the
           counter even when it creates nothing: the event names it (deduplicatedJobId, as
           BullMQ's). A repeated call (same producer and seq) gets the first run's reply.
  Errors   ERR_INVALID (an argument, named with its job), ERR_TOO_LARGE (data over maxPayload),
           ERR_WRONG_TYPE (a key the call writes holds another type: another program wrote to it).
           Every job of the call is checked, and the type of every key it writes, before the first
           write: a refused call adds nothing and changes nothing.
  glidemq_addData — adds `count` jobs that share their name and every option: each gets the next id
  from the counter, is created (no custom id, dedup or group here: those go through glidemq_add),
  and is stored exactly as glidemq_add stores a job with those options. Ids as glidemq_add's (guardIdCounter). Only the data is sent per
  job, so a bulk costs the server a fraction of what glidemq_add's 12 arguments per job cost.
  KEYS[1]  meta key of the queue.
  ARGV[1]  maxPayload: as glidemq_add's.
  ARGV[2]  producer: as glidemq_add's (once-only calls: a producer numbers the calls of both
           functions in one sequence).
  ARGV[3]  seq: as glidemq_add's.
  ARGV[4]  answeredBelow: as glidemq_add's.
  ARGV[5]  name: every job's name (1..1024 bytes).
  ARGV[6]  delay: ms every job waits before it may run (0 = none), from the server's clock.
  ARGV[7]  priority: 0 = none, else 1..2097152.
  ARGV[8]  lifo: '1' last in, first out; '0' not.
  ARGV[9]  attempts: attempts before a job fails for good (>= 1).
  ARGV[10] opts: as glidemq_add's group.opts (lua/jobs.lua JOB_OPTS).
  ARGV[11] count: how many jobs the call adds (0..10000); `count` arguments follow, one per job:
    group.data: the job's data (JSON text, at most maxPayload bytes).
  Returns  a flat list of numbers: ts, then the new jobs' ids in runs of consecutive ids, each run
           as its first and its last id: ts, from1, to1, from2, to2, ... in the order of the data
           (one run unless an id of the counter was taken by a job an older version stored). ts
           is the server time (ms) stored as every job's ts. A repeated call (same producer and
           seq) gets the first run's reply.
  Errors   ERR_INVALID (an argument), ERR_TOO_LARGE (data over maxPayload, naming its position),
           ERR_WRONG_TYPE (a key the call writes holds another type). All checked before the first
           write: a refused call adds nothing.
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local ADD_HEAD = { 'maxPayload', ARG.int(0, MAX_SAFE_INT), 'producer', ARG.producer,
  'seq', ARG.callSeq, 'answeredBelow', ARG.callSeq, 'count', ARG.count }
local ADD_DATA_HEAD = { 'maxPayload', ARG.int(0, MAX_SAFE_INT), 'producer', ARG.producer,
  'seq', ARG.callSeq, 'answeredBelow', ARG.callSeq,
  'name', ARG.jobName, 'delay', ARG.ms, 'priority', ARG.int(0, MAX_PRIORITY), 'lifo', ARG.flag,
  'attempts', ARG.int(1, MAX_SAFE_INT), 'opts', JOB_OPTS, 'count', ARG.count }
local ADD_DATA_JOB = { 'data', ARG.any }
-- (one step, args.lua readGroup: its one argument takes any string)
ADD_DATA_JOB.read = function(args, at) return { data = args[at] } end
local ADD_JOB = {
  'jobId', kind(function()
    return "'' or a custom job id (1 to " .. MAX_ID_LEN .. ' bytes, no ":", "{", "}", whitespace or control characters)' ..
      ' that is not a whole number (whole numbers are the ids the queue hands out; use e.g. "order-2")'
  end, function(v)
    if v == '' then return v end
    if string.find(v, '^%-?%d+$') then return nil end
    return ARG.jobId.check(v)
  end),
  'name', ARG.jobName,
  'data', ARG.any,
  'delay', ARG.ms,
  'priority', ARG.int(0, MAX_PRIORITY),
  'lifo', ARG.flag,
  'attempts', ARG.int(1, MAX_SAFE_INT),
  'opts', JOB_OPTS,
  'dedupId', kind("'' or a dedup id of 1 to " .. DEDUP_MAX_ID_LEN .. ' bytes', function(v)
    if #v <= DEDUP_MAX_ID_LEN then return v end
    return nil
  end),
  'dedupTtl', ARG.int(0, DEDUP_MAX_TTL),
  'dedupMode', kind("'' (no dedup), simple, throttle, extend or debounce", function(v)
    if v == '' or DEDUP_MODES[v] then return v end
    return nil
  end),
  -- (groupParse, in checkAddCall before the first write, decodes and checks it: decoded once)
  'groupSpec', ARG.any,
}

-- A job's group decoded in one step (args.lua readGroup): each argument checked by its kind in
-- ADD_JOB (by position: the kinds are the schema's even entries), the table built whole with the
-- field checkAddCall adds (group); nil on a bad argument, which readGroup's loop then names.
ADD_JOB.read = function(args, at)
  local s = ADD_JOB
  local jobId, name, delay = s[2].check(args[at]), s[4].check(args[at + 1]), s[8].check(args[at + 3])
  local priority, lifo, attempts = s[10].check(args[at + 4]), s[12].check(args[at + 5]), s[14].check(args[at + 6])
  local opts, dedupId, dedupTtl = s[16].check(args[at + 7]), s[18].check(args[at + 8]), s[20].check(args[at + 9])
  local dedupMode, data, groupSpec = s[22].check(args[at + 10]), args[at + 2], args[at + 11]
  if not (jobId and name and data and delay and priority and lifo ~= nil and attempts and opts and dedupId
    and dedupTtl and dedupMode and groupSpec) then return nil end
  return { jobId = jobId, name = name, data = data, delay = delay, priority = priority, lifo = lifo,
    attempts = attempts, opts = opts, dedupId = dedupId, dedupTtl = dedupTtl, dedupMode = dedupMode,
    groupSpec = groupSpec, group = false }
end

-- Names job i of a call in an error; built only when there is an error to report.
local function addLabel(job, i)
  return 'glidemq_add: ' .. (job.jobId ~= '' and ('job ' .. job.jobId) or ('job #' .. i .. ' of the call'))
end

-- The checks decodeArgs cannot express, and the type of every key the call may write. Reads only.
-- Sets job.group (the decoded group spec) for the write phase.
local function checkAddCall(k, a, jobs)
  local spec = { 'meta', 'hash', 'id', 'string', 'events', 'stream', 'stream', 'stream', 'wake', 'stream' }
  local seen, groups = {}, {}
  local function need(name, t)
    if not seen[name] then
      seen[name] = true
      spec[#spec + 1], spec[#spec + 2] = name, t
    end
  end
  for i = 1, #jobs do
    local job = jobs[i]
    if a.maxPayload > 0 and #job.data > a.maxPayload then
      refuse('ERR_TOO_LARGE', addLabel(job, i) .. ': data is ' .. #job.data .. ' bytes, over the limit of ' ..
        a.maxPayload .. ' bytes (maxPayload); store large data elsewhere and enqueue a reference')
    end
    if job.priority > 0 and job.lifo then
      refuse('ERR_INVALID', addLabel(job, i) .. ': a job cannot be both prioritized and LIFO (send priority 0 or lifo 0)')
    end
    if job.dedupId ~= '' or job.dedupMode ~= '' or job.dedupTtl ~= 0 then
      checkDedup(addLabel(job, i), job.dedupId, job.dedupTtl, job.dedupMode, job.delay)
    end
    if job.groupSpec ~= '' then
      local g, why = groupParse(job.groupSpec)
      if not g then refuse('ERR_INVALID', addLabel(job, i) .. ': groupSpec: ' .. why) end
      if job.priority > 0 or job.lifo then
        refuse('ERR_INVALID', addLabel(job, i) .. ": a group job runs in its group's order: it cannot be prioritized or LIFO")
      end
      job.group = g
      groups[g.id] = true
      need('readyGroups', 'zset')
      need('timedGroups', 'zset')
    end
    if job.delay > 0 or job.dedupMode == 'debounce' then need('scheduled', 'zset') end
    if job.priority > 0 then need('prioritized', 'zset') end
    if job.lifo then need('lifo', 'list') end
    if job.dedupId ~= '' then need('dedup', 'hash') end
  end
  requireTypes(k, spec)
  for i = 1, #jobs do
    local job = jobs[i]
    -- a custom id's hash is read (exists?) and a new job written there
    if job.jobId ~= '' then requireKeyType(jobKey(k, job.jobId), 'hash') end
    -- an earlier job a dedup entry points at is read, and a debounce writes its data
    if job.dedupId ~= '' then
      local v = redis.call('HGET', k.dedup, job.dedupId)
      if v then
        local _, _, existing = parseDedupEntry(v)
        if existing and existing ~= '' then requireKeyType(jobKey(k, existing), 'hash') end
      end
    end
  end
  -- the group's keys, and the job hashes adding to it reads (the holder of an ordered group's
  -- hold; the slot holders when it is full: touchGroup heals those that no longer hold a claim)
  for gid in pairs(groups) do
    local gk, gjobs = groupKeys(k, gid)
    requireKeyType(gk, 'hash')
    requireKeyType(gjobs, 'zset')
    local g = readGroup(gk)
    if g.heldBy then requireKeyType(jobKey(k, g.heldBy), 'hash') end
    local limit = concurrencyLimit(g)
    if limit > 0 and toInt(g.active, 0) >= limit then
      local all = redis.call('HGETALL', gk)
      for f = 1, #all, 2 do
        if string.sub(all[f], 1, 2) == 'h:' then requireKeyType(jobKey(k, string.sub(all[f], 3)), 'hash') end
      end
    end
  end
end

register('glidemq_add', function(keys, args)
  local k = keysFor(keys[1])
  local a, jobs = decodeArgs('glidemq_add', args, ADD_HEAD, ADD_JOB, 'count')
  ARG.checkProducerCall('glidemq_add', a)
  local pk, kept, low = producerCall(k, a.producer, a.seq)
  if kept then return kept end
  checkAddCall(k, a, jobs)
  local now = serverNow()

  ensureQueue(k)
  -- Jobs that surely take an id from the counter (no custom id, no dedup) get them from one
  -- INCRBY; one that meets a job a numeric custom id created falls back to nextJobId.
  local plain, counted = 0, false
  for i = 1, #jobs do
    local job = jobs[i]
    if job.jobId == '' and job.dedupId == '' then plain = plain + 1 end
    if job.jobId == '' then counted = true end
  end
  if counted then guardIdCounter(k) end
  local reserved, lastReserved = 1, 0
  if plain > 1 then
    lastReserved = redis.call('INCRBY', k.id, plain)
    reserved = lastReserved - plain + 1
  end
  local out = { now }
  for i = 1, #jobs do
    local job = jobs[i]
    local id = job.jobId
    local created = 1
    local verdict, existing = 'new', nil
    if job.dedupId ~= '' then
      -- as BullMQ's, an add with a dedup id takes its id first: a deduplicated add's event names it
      if id == '' then id = nextJobId(k) end
      verdict, existing = applyDedup(k, now, job.dedupId, job.dedupTtl, job.dedupMode, job.data, job.delay, id)
    end
    if verdict ~= 'new' then
      id, created = existing, (verdict == 'blocked' and 2 or 3)
    elseif id == '' and job.dedupId == '' and reserved <= lastReserved then
      id = tostring(reserved)
      reserved = reserved + 1
      if redis.call('EXISTS', jobKey(k, id)) == 1 then id = nextJobId(k) end
    elseif id == '' then
      id = nextJobId(k)
    elseif redis.call('EXISTS', jobKey(k, id)) == 1 then
      created = 0
      emit(k, 'duplicated', id) -- BullMQ's QueueEvents 'duplicated': the add was ignored
    end
    if created == 1 then
      insertJob(k, now, id, job.name, job.data, job.delay, job.priority, job.lifo, job.attempts, job.opts, job.group)
      if job.dedupId ~= '' then recordDedup(k, now, job.dedupId, job.dedupTtl, job.dedupMode, job.delay, id) end
    end
    out[#out + 1] = id
    out[#out + 1] = created
  end
  if pk then rememberReply(pk, a.seq, a.answeredBelow, low, out) end
  return out
end)

local EXISTS_BATCH = 1000 -- job keys per EXISTS (unpack's limit is a few thousand values)


register('glidemq_addData', function(keys, args)
  local k = keysFor(keys[1])
  local a, jobs = decodeArgs('glidemq_addData', args, ADD_DATA_HEAD, ADD_DATA_JOB, 'count')
  ARG.checkProducerCall('glidemq_addData', a)
  -- (a repeated call's reply is all numbers: ts and the runs of ids)
  local pk, kept, low = producerCall(k, a.producer, a.seq, true)
  if kept then return kept end
  if a.priority > 0 and a.lifo then
    refuse('ERR_INVALID', 'glidemq_addData: a job cannot be both prioritized and LIFO (send priority 0 or lifo 0)')
  end
  local limit = a.maxPayload
  if limit > 0 then
    for i = 1, #jobs do
      local job = jobs[i]
      if #job.data > limit then
        refuse('ERR_TOO_LARGE', 'glidemq_addData: job #' .. i .. ' of the call: data is ' .. #job.data ..
          ' bytes, over the limit of ' .. limit .. ' bytes (maxPayload); store large data elsewhere and enqueue a reference')
      end
    end
  end
  -- every key a job may be written to, whatever the options (a few TYPE calls per call)
  requireTypes(k, INSERT_JOB_WRITES)
  local now = serverNow()
  ensureQueue(k)
  local out = { now }
  local n = #jobs
  if n > 0 then
    -- One INCRBY for every id, and one EXISTS per EXISTS_BATCH of their job keys: only when one
    -- of them holds a job (stored by an older version under a numeric custom id) are they looked
    -- at one by one, and such an id falls back to nextJobId (the ids then form more than one run).
    guardIdCounter(k)
    local first = redis.call('INCRBY', k.id, n) - n + 1
    local taken = false
    for b = 0, n - 1, EXISTS_BATCH do
      local jks = {}
      for i = 1, math.min(EXISTS_BATCH, n - b) do jks[i] = k.jobPrefix .. (first + b + i - 1) end
      if redis.call('EXISTS', unpack(jks)) > 0 then taken = true; break end
    end
    local name = a.name
    local id = first
    local from, to = nil, nil
    for i = 1, #jobs do
      local job = jobs[i]
      local sid = tostring(id)
      local this = id
      if taken and redis.call('EXISTS', jobKey(k, sid)) == 1 then
        sid = nextJobId(k)
        this = tonumber(sid)
      end
      id = id + 1
      insertJob(k, now, sid, name, job.data, a.delay, a.priority, a.lifo, a.attempts, a.opts, nil)
      if from and this == to + 1 then
        to = this
      else
        if from then out[#out + 1], out[#out + 2] = from, to end
        from, to = this, this
      end
    end
    out[#out + 1], out[#out + 2] = from, to
  end
  if pk then rememberReply(pk, a.seq, a.answeredBelow, low, out) end
  return out
end)
end
