--[[ activate.lua — shared locals: turning a delivered or popped job into an active claim.
  A claim is fenced: every activation increments the job's `fence` field (but a repeated one of
  the same claim by the same consumer, activateEntry), and complete/fail/progress/heartbeat take
  effect only with the fence and consumer of the current claim.
  Priority, LIFO and group jobs are popped and activated in the same function call, so no crash
  can fall between the pop and the claim (there is no window in which a popped job is unowned).
  Times (processedOn, lockedAt) are the server's `now` (helpers.lua serverNow), read once per call
  by the function that claims: lock ages compare them with the server's clock, never a worker's.
  A list claim (priority, LIFO, group) records lockedAt, its lock age's start (lua/list-active.lua
  lockAge); a stream claim's lock age is its pending entry's idle time, kept by the server, so it
  writes none (a heartbeat writes one, lua/progress.lua, which no stalled check reads).
  The require* helpers below check, before a call's first write, the types of the keys the
  delivery paths will write (the fetch part of a call, a claim release, a requeue).
  Events: a claim writes 'active' only while a QueueEvents listens (`listening`, lua/events.lua);
  fetchNext says when it found nothing left waiting, for the 'drained' event of lua/finish.lua.
  Claims handed out ahead (a worker's prefetch: `ahead` in fetchNext) are marked not started: the
  hash field `ns` holds the claim's fence until the worker reports that a processor took it
  (lua/finish.lua, started). Stalled recovery gives such a claim back without counting a stall
  (lua/reclaim.lua), once per attempt: the attempt that was given back so carries `nsr`, and its
  next claims are not marked, so a job that kills its worker before the start is reported still
  counts its stalls from the next crash on. A finish clears both fields; any other end of a claim
  leaves `ns` naming a fence that is no longer the job's, which no reclaim takes for a mark.
  Terms: a claim records, in the HSET that makes it, the lock duration and maxStalledCount of the
  worker it is made for (hash field `terms`, '<lockMs>:<maxStalledCount>'; the claiming function
  names them with claimTerms): stalled recovery judges the claim by them, not by the settings of
  the worker that runs the check (lua/reclaim.lua). A claim handed over again keeps its terms.
  Plain: the terms of a claim of a job that had no `rf`, `flow` or `parents` field end with ':p'
  ('30000:1:p'; PLAIN below). Its finish then reads none of the three (lua/finish.lua planFinish: a
  hash read of a field the hash lacks scans every field, and a plain job lacks all three). Only a
  finish that ends the claim writes `rf`; a function that gives a claimed job `flow` or `parents`
  takes the mark off (PLAIN.lose). Terms without the mark (a claim an older glidemq made) make the
  finish read them; a new lock for the claim (glidemq_extendLock) keeps the mark.
  Meta's `lockFloor` is the shortest lock any claim of the queue was made with: the stream check
  reads pending entries idle at least that long (lua/reclaim.lua). It is read in the HMGET of
  meta the claiming function makes anyway (RATE.META) and written only by a call whose lock is
  shorter, so it costs the hot path nothing. It never rises (a claim's lock is not known without
  reading it): a queue that once had a short-lock worker keeps checking entries idle that long.
]]
-- Shared with the function files; the other locals stay inside the block below (the main chunk
-- may hold at most 200 locals, lua/ORDER).
local popListJob, activateEntry, handBack, fetchNext, checkFetch,
  requireReleaseTypes, requireRequeueTypes, STREAM_TYPES, LIST_TYPES, claimReply, handOverAgain, listening,
  claimTerms, PLAIN
do

-- The key under which claimTerms keeps a call's terms on its key table (a table: no key name).
local TERMS = {}
-- What ends the terms of a plain job's claim (see the header).
local PLAIN_MARK = ':p'

--[[ The plain mark of a claim's terms (see the header), for its readers:
  PLAIN.is(terms)   whether the terms (the hash field's value, or nil) carry the mark; the last
                    terms found so are kept in PLAIN.last (a reader on the hot path compares
                    with it first: the claims of one worker have the same terms);
  PLAIN.lose(jk)    takes the mark off job `jk`'s terms, if they carry it: a function that gives a
                    job an rf, flow or parents field calls it (a claimed job's finish must then read
                    them; lua/flow-keys.lua FLOW.mark);
  PLAIN.match       the pattern of terms with the mark ('^(%d+):(%d+):p$'), for their parsers. ]]
PLAIN = { last = PLAIN_MARK, match = '^(%d+):(%d+)' .. PLAIN_MARK .. '$' }
PLAIN.is = function(terms)
  if terms == PLAIN.last then return true end
  if not terms or string.sub(terms, -2) ~= PLAIN_MARK then return false end
  PLAIN.last = terms
  return true
end
PLAIN.lose = function(jk)
  local terms = redis.call('HGET', jk, 'terms')
  if PLAIN.is(terms) then redis.call('HSET', jk, 'terms', string.sub(terms, 1, -3)) end
end
-- The position of lockFloor in RATE.META (lua/rate-window.lua).
local LOCK_FLOOR_AT = 7

--[[ Sets the terms the claims of this call are made under (see the header): the worker's
  lockDuration `lockMs` and `maxStalledCount`. `m`: the caller's HMGET of RATE.META, whose
  lockFloor says whether this lock lowers the queue's floor (written with the call's first claim).
  A function that claims calls it before its first claim; kept on `k`, the call's key table. ]]
claimTerms = function(k, lockMs, maxStalledCount, m)
  local floor = tonumber(m[LOCK_FLOOR_AT])
  local text = string.format('%.0f:%.0f', lockMs, maxStalledCount)
  rawset(k, TERMS, { text = text, plain = text .. PLAIN_MARK, lock = lockMs, lowers = floor == nil or lockMs < floor })
end

-- The key under which `listening` keeps its answer on a call's key table (a table: no key name).
local LISTENING = {}

--[[ Whether a QueueEvents listens to the queue at the server's time `now`: meta's eventsUntil is
  ahead of it (lua/events.lua). The per-job events ('active', 'completed' with its value, 'drained',
  'retries-exhausted') are written only then. Read once per call and kept on `k`, the call's key
  table: from `m`, the caller's HMGET of meta, when its third field is eventsUntil (a finish asks
  for it with the fields it reads anyway: no extra read), else with one HGET. ]]
listening = function(k, now, m)
  local v = rawget(k, LISTENING)
  if v == nil then
    local untilMs = m and m[3]
    if untilMs == nil then untilMs = redis.call('HGET', k.meta, 'eventsUntil') end
    v = (tonumber(untilMs) or 0) > now
    rawset(k, LISTENING, v)
  end
  return v
end

-- Hash fields a worker has no use for (delivery bookkeeping), or that a claim sets anew.
local CLAIM_REPLY_SKIPS = { sid = true, owner = true, src = true, lockedAt = true, state = true, fence = true, processedOn = true,
  ns = true, nsr = true, terms = true }
-- Fields every job has (opts: most), sent by position in a claim reply rather than by name.
local CLAIM_REPLY_SLOTS = { name = 3, data = 4, ts = 5, opts = 6 }
-- Fields a finish reads besides the claim's own (lua/finish.lua planFinish): a job with none of
-- them at its claim is plain (see the header).
local NOT_PLAIN = { rf = true, flow = true, parents = true }

-- One pass over a job's HGETALL reply: the claim reply (src/engine/jobs/job.ts, decodeClaim): id,
-- fence (filled in by claimJob), name, data, ts, opts (false: none) by position, then the job's
-- other stored fields as name/value pairs without the bookkeeping ones; and the job's current
-- fence, state, sid and owner, which the caller decides on, and whether this attempt was given
-- back unstarted once (nsr, see the header), and whether the job is plain (no rf, flow or parents
-- field: see the header). The reply carries no string the worker already knows: every string in
-- it costs the server and the client.
claimReply = function(id, fields)
  -- (the nils give the list room for one stored field more, a flow child's parents: filled past
  -- its size, it is rehashed; set in order from 7, it has no gap, and the reply ends at its last)
  local out = { id, '', false, false, false, false, nil, nil }
  local n, fence, state, sid, owner, returned, plain = 6, 0, nil, nil, nil, false, true
  for i = 1, #fields, 2 do
    local f, v = fields[i], fields[i + 1]
    local slot = CLAIM_REPLY_SLOTS[f]
    if slot then
      out[slot] = v
    elseif not CLAIM_REPLY_SKIPS[f] then
      out[n + 1], out[n + 2] = f, v
      n = n + 2
      if NOT_PLAIN[f] then plain = false end
    elseif f == 'fence' then
      fence = tonumber(v) or 0
    elseif f == 'state' then
      state = v
    elseif f == 'sid' then
      sid = v
    elseif f == 'owner' then
      owner = v
    elseif f == 'nsr' then
      returned = true
    end
  end
  return out, fence, state, sid, owner, returned, plain
end

-- Claims a job for `consumer` given the claim reply and fence claimReply made of its hash (read
-- by the caller, which checked it), and returns the reply. The hash is read once and written
-- once, with the call's terms (claimTerms). The state is 'active'; processedOn (and a list claim's
-- lockedAt, see the header) is `now`, the server's time read once by the calling function, turned
-- into text once per call (passed as a number, each HSET would run sprintf on it). `ahead`: the
-- claim is marked not started (see the header) unless this attempt was given back unstarted
-- before (`returned`, from claimReply). The fields a finish reads (fence, state, owner, src,
-- terms) go first: a hash read scans its fields in the order they were written.
local function claimJob(k, id, jk, out, fence, consumer, now, src, ahead, returned, plain)
  fence = ARG.smallText[fence + 1] or tostring(fence + 1) -- (a table lookup for the usual small fence: tostring runs sprintf)
  out[2] = fence
  -- (a function that claims without naming its terms is a bug: it raises here, before any write of this claim)
  local terms = rawget(k, TERMS) or error('claimJob: the calling function set no claim terms (claimTerms)')
  local at = terms.at
  if terms.now ~= now then at = string.format('%.0f', now); terms.now, terms.at = now, at end
  local text = plain and terms.plain or terms.text
  -- (four spelled-out HSETs, not one through a vararg helper: that call costs ~0.6k instructions
  -- a claim, 0.4 % of a job's server work, measured with instructions.js)
  if src ~= 's' then
    if ahead and not returned then
      redis.call('HSET', jk, 'fence', fence, 'state', 'active', 'owner', consumer, 'src', src, 'terms', text, 'processedOn', at,
        'lockedAt', at, 'ns', fence)
    else
      redis.call('HSET', jk, 'fence', fence, 'state', 'active', 'owner', consumer, 'src', src, 'terms', text, 'processedOn', at,
        'lockedAt', at)
    end
  elseif ahead and not returned then
    redis.call('HSET', jk, 'fence', fence, 'state', 'active', 'owner', consumer, 'src', src, 'terms', text, 'processedOn', at,
      'ns', fence)
  else
    redis.call('HSET', jk, 'fence', fence, 'state', 'active', 'owner', consumer, 'src', src, 'terms', text, 'processedOn', at)
  end
  if terms.lowers then
    redis.call('HSET', k.meta, 'lockFloor', terms.lock)
    terms.lowers = false
  end
  if src ~= 's' then listClaim(k, id) end
  -- best effort, as readJob's 'skipped': the claim is made, and an events key of another type
  -- (checked by no caller: only a listened queue writes it here) must not fail the call after it
  -- (its answer kept on `k` read without a call per claim; the callers asked it before their claims)
  local listen = rawget(k, LISTENING)
  if listen == nil then listen = listening(k, now) end
  if listen then
    redis.pcall('XADD', k.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'event', 'active', 'jobId', id)
  end
  return out
end

-- Hands a claim its consumer already holds over again (a repeated call, a worker taking back what
-- a lost reply carried): the same claim and fence, its lock renewed at `now`. `out` and `fence`
-- are claimReply's for the job's hash. Returns the claim reply.
handOverAgain = function(jk, out, fence, now)
  redis.call('HSET', jk, 'lockedAt', now)
  out[2] = tostring(fence)
  return out
end

-- A job hash another program replaced by another type (a string, a list...): reading it must not
-- fail the whole call, or that one key would stop every worker of the queue. Returns the fields,
-- or nil for such a key (which is then skipped and left as it is). The 'skipped' event is best
-- effort: an events key of another type too must not fail a call that has written already.
local function readJob(k, id, jk)
  local fields = redis.pcall('HGETALL', jk)
  if fields.err then
    redis.pcall('XADD', k.events, 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'event', 'skipped', 'jobId', id,
      'reason', 'the job key holds another type than a hash (written by another program)')
    return nil
  end
  return fields
end

-- Marks a group job popped by takeGroupJob active for `consumer` and returns its claim reply, or
-- nil when its key holds another type (left as it is; group.lua heals the slot it took).
local function activateGroupJob(k, id, consumer, now, ahead)
  local jk = jobKey(k, id)
  local fields = readJob(k, id, jk)
  if not fields then return nil end
  local out, fence, _, _, _, returned, plain = claimReply(id, fields)
  return claimJob(k, id, jk, out, fence, consumer, now, 'g', ahead, returned, plain)
end

-- Pops one priority job, else one LIFO job, else one group job, and activates it (marked not
-- started when `ahead`). Returns fields or nil.
popListJob = function(k, consumer, now, ahead)
  while true do
    local id, src
    local top = redis.call('ZPOPMIN', k.prioritized)
    if top[1] then
      id, src = top[1], 'p'
    else
      id = redis.call('LPOP', k.lifo)
      if not id then
        id = takeGroupJob(k, consumer, now)
        if not id then return nil end
        return activateGroupJob(k, id, consumer, now, ahead)
      end
      src = 'l'
    end
    -- A job removed while it waited leaves only its id behind; skip such leftovers.
    local jk = jobKey(k, id)
    local fields = readJob(k, id, jk)
    if fields and fields[1] then
      local out, fence, _, _, _, returned, plain = claimReply(id, fields)
      return claimJob(k, id, jk, out, fence, consumer, now, src, ahead, returned, plain)
    end
  end
end

-- Activates one stream entry delivered to `consumer` (marked not started when `ahead`); returns
-- fields, or nil for a leftover entry.
activateEntry = function(k, sid, id, consumer, now, ahead)
  local jk = k.jobPrefix .. id -- (jobKey's name, without a call per job)
  local out, fence, state, esid, owner, returned, plain = claimReply(id, readJob(k, id, jk) or {})
  if state == 'active' and esid == sid then
    -- The entry is the pending entry of a live claim: never drop it (stalled recovery needs it).
    -- Claimed by this same consumer means a call repeated after its reply was lost on the way
    -- (a client resends unanswered commands on reconnect, and a reconnected worker takes back
    -- what it was delivered, src/engine/consuming/claim-recovery.ts): hand the same claim over again, with
    -- the same fence and its lock renewed, so a worker that gets it twice runs it once.
    if owner == consumer then return handOverAgain(jk, out, fence, now) end
    return nil
  end
  if state ~= 'waiting' or esid ~= sid then
    -- removed job, or an entry superseded by a redispatch: never re-create or double-run it
    redis.call('XACK', k.stream, GROUP, sid)
    redis.call('XDEL', k.stream, sid)
    return nil
  end
  return claimJob(k, id, jk, out, fence, consumer, now, 's', ahead, returned, plain)
end

-- Gives a delivered but not activated entry back to the queue (paused, or no global slot or rate
-- room), ahead of the stream it came from: the LIFO list's tail (claims take that list before the
-- stream; a job a worker gives back, lua/release.lua, goes to its head). The caller checked the
-- LIFO list's type.
handBack = function(k, sid, id)
  local jk = jobKey(k, id)
  local st = redis.pcall('HMGET', jk, 'state', 'sid')
  if st.err then st = {} end
  -- the pending entry of a live claim (a repeated call) stays for stalled recovery
  if st[1] == 'active' and st[2] == sid then return end
  redis.call('XACK', k.stream, GROUP, sid)
  redis.call('XDEL', k.stream, sid)
  if st[1] == 'waiting' then
    redis.call('RPUSH', k.lifo, id)
    redis.call('HDEL', jk, 'sid') -- its stream entry is gone
  end
end

-- Keys the delivery paths write, by the path that writes them (for requireTypes, before a call's
-- first write). A stream claim: the job stream. List claims (priority, LIFO, group pops and their
-- release): the lists, the list-active bookkeeping and the group queues with their wake-ups.
-- A requeue (enqueueReady, groupEnqueue): every place a job may go, and meta (pseq, groupWaiting).
STREAM_TYPES = { 'stream', 'stream' }
LIST_TYPES = { 'prioritized', 'zset', 'lifo', 'list', 'listActiveIds', 'set', 'listActive', 'string',
  'readyGroups', 'zset', 'timedGroups', 'zset', 'wake', 'stream', 'meta', 'hash' }
local REQUEUE_TYPES = { 'stream', 'stream', 'prioritized', 'zset', 'lifo', 'list', 'wake', 'stream',
  'readyGroups', 'zset', 'timedGroups', 'zset', 'meta', 'hash' }

-- Checks the keys that releasing a claim with delivery source `src` writes (releaseClaim): the
-- stream for a stream claim; for a list claim the list bookkeeping and the queue keys a group
-- release touches (groupRelease itself steps around a group key of another type, group.lua).
requireReleaseTypes = function(k, src)
  if src == 's' then
    requireTypes(k, STREAM_TYPES)
  elseif src then
    requireTypes(k, LIST_TYPES)
  end
end

-- Checks the keys a requeue (helpers.lua requeue) of a job of group `gid` (or nil) may write.
requireRequeueTypes = function(k, gid)
  requireTypes(k, REQUEUE_TYPES)
  if gid then groupRequireTypes(k, gid) end
end

-- The check phase of fetchNext, run before the calling function's first write: a fetch of `count`
-- jobs with the meta fields `m` (RATE.META, lua/rate-window.lua) writes the stream, and writes the
-- lists when they hold jobs now or `lists` says the call's own writes may put some there (a
-- requeue, a released list claim); under a limit it reads list-active after those writes; under
-- a rate limiter it logs the starts.
-- Returns the `lists` argument for fetchNext: false when the lists are and will stay empty
-- (fetchNext then skips looking), true otherwise.
checkFetch = function(k, count, m, lists)
  if count <= 0 or m[1] == '1' then return false end
  requireTypes(k, STREAM_TYPES)
  if not lists then
    lists = redis.call('EXISTS', k.prioritized, k.lifo, k.readyGroups, k.timedGroups) > 0
  end
  -- a globalConcurrency limit reads list-active (activeCount) after the call's writes
  if lists or toInt(m[2], 0) > 0 then requireTypes(k, LIST_TYPES) end
  if m[4] then requireTypes(k, RATE.TYPES) end
  return lists
end

-- Fetches up to `count` jobs: priority first, then LIFO, then the stream. Obeys pause, the
-- global limit and the rate limiter. `m`: the meta fields RATE.META the caller read in this call;
-- `lists`: what checkFetch returned (the caller ran it before its first write). `now` is the
-- server's time; `ahead`: the claims are a worker's prefetch, marked not started (see the header).
-- Returns a list of claim replies; whether it got fewer than it wanted because
-- nothing was left waiting (no stream entry, priority, LIFO or group job): told only while a
-- QueueEvents listens (`listening`), false otherwise; and the ms until the rate limiter lets a job
-- start when it is what kept the call from getting all it wanted (0 otherwise).
fetchNext = function(k, consumer, now, count, m, lists, ahead)
  local out = {}
  if count <= 0 or m[1] == '1' then return out, false, 0 end
  local wanted = count
  local limit = toInt(m[2], 0)
  if limit > 0 then
    local free = limit - activeCount(k)
    if free < count then count = math.max(free, 0) end
  end
  local room = RATE.room(k, now, m)
  if room < count then count = room end
  -- one EXISTS answers for the lists and the groups in the common case where none holds a job
  if count > 0 and lists ~= false and redis.call('EXISTS', k.prioritized, k.lifo, k.readyGroups, k.timedGroups) > 0 then
    while #out < count do
      local job = popListJob(k, consumer, now, ahead)
      if not job then break end
      out[#out + 1] = job
    end
  end
  local empty = false
  local guard = 0
  while #out < count and guard < 4 do
    guard = guard + 1
    local want = count - #out
    local r = redis.pcall('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', want, 'STREAMS', k.stream, '>')
    if type(r) == 'table' and r.err then
      -- no consumer group (the stream was deleted or its group destroyed by hand): nothing to
      -- deliver, and the call's writes stand; the worker's own read meets NOGROUP and has
      -- glidemq_fetch create the groups again
      if string.find(r.err, '^NOGROUP') then break end
      error(r)
    end
    if not r or not r[1] then
      empty = true
      break
    end
    local entries = r[1][2]
    if #entries == 0 then
      empty = true
      break
    end
    for i = 1, #entries do -- (a numeric loop: ipairs costs a function call per job)
      local e = entries[i]
      local sid, f = e[1], e[2]
      local id = f and f[2]
      if id then
        local job = activateEntry(k, sid, id, consumer, now, ahead)
        if job then out[#out + 1] = job end
      else
        redis.call('XACK', k.stream, GROUP, sid)
        redis.call('XDEL', k.stream, sid)
      end
    end
  end
  -- the stream had nothing more: drained unless group jobs wait (in groups that are full or
  -- rate-limited, meta's groupWaiting) or list jobs came in (asked only while a QueueEvents
  -- listens: nothing else uses the answer)
  if empty and #out < count and listening(k, now) then
    empty = redis.call('EXISTS', k.prioritized, k.lifo) == 0 and toInt(redis.call('HGET', k.meta, 'groupWaiting'), 0) <= 0
  else
    empty = false
  end
  if m[4] then RATE.record(k, now, m, out) end
  -- the window is full (or held) and the caller wanted more: say how long it stays so
  local wait = 0
  if room <= #out and #out < wanted then wait = select(2, RATE.room(k, now, m)) end
  return out, empty, wait
end
end
