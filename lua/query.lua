--[[ query.lua — glidemq_getCounts and glidemq_listJobs. Read-only (both run on a replica too).

  glidemq_getCounts
    KEYS[1]  meta key.
    ARGV     none.
    Returns  a flat list: waiting, active, delayed, prioritized, completed, failed, paused (1|0),
             listActive, streamPending, groupWaiting, waitingChildren (parents waiting for their
             children, lua/flow-keys.lua).
             waiting counts stream entries not yet delivered, LIFO jobs and jobs waiting in groups
             (meta's groupWaiting); active counts stream pending entries plus claimed
             priority/LIFO/group jobs; delayed counts the scheduled set, which holds the delayed jobs
             of ordered groups that keep their place in their group's line (lua/group.lua).
             glidemq_drain removes exactly the jobs counted as waiting and prioritized (and delayed
             when asked); glidemq_listJobs lists them by the same rules.
    Errors   ERR_INVALID (any argument), ERR_WRONG_TYPE (a key it reads holds another type).

  glidemq_listJobs — the ids of the jobs of some states, all read in one call, so a job that moves
    while a listing is made is listed once, under the state it had (Queue.getJobs; issue 27).
    KEYS[1]  meta key.
    ARGV[1]  start: the first position of each state's page (negative counts from the end).
    ARGV[2]  stop: the last position of each state's page, inclusive (negative counts from the end).
    ARGV[3]  asc: '1' the next to run (first activated, first finished) first, '0' the other way.
    ARGV[4]  states: the states to list, joined by ',' (waiting, paused, active, delayed,
             prioritized, completed, failed, waiting-children; 'paused' lists the waiting jobs of
             a paused queue).
    ARGV[5]  groupCount: how many group ids follow (0..10000), each:
      group.groupId: a group whose line holds waiting jobs (the caller finds them by SCAN, as
             for glidemq_drain: no queue key lists them all).
    Each state is classified as glidemq_getCounts counts it: waiting is the LIFO list, then the
    stream entries not yet delivered, then the waiting jobs of the groups named (in that order);
    active is every pending stream entry (a prefetched claim, and an entry a blocking read
    delivered that is not activated yet, included) and every claimed priority/LIFO/group job,
    the one claimed first first (the server's processedOn).
    Returns  {complete, ids of the first state, ids of the second, ...}: complete is 0 when
             waiting jobs were asked for and the groups named do not hold all of meta's
             groupWaiting (a group was not named: the caller finds the groups again and asks
             again), else 1.
    Errors   ERR_INVALID (an argument, named), ERR_WRONG_TYPE (a key it reads holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local COUNTS_ARGS = {}
local LIST_STATES = { waiting = true, paused = true, active = true, delayed = true, prioritized = true, completed = true,
  failed = true, ['waiting-children'] = true }
local LIST_ARGS = { 'start', ARG.int(-MAX_SAFE_INT, MAX_SAFE_INT), 'stop', ARG.int(-MAX_SAFE_INT, MAX_SAFE_INT),
  'asc', ARG.flag,
  'states', kind('states joined by "," (waiting, paused, active, delayed, prioritized, completed, failed, waiting-children)', function(v)
    local out = {}
    for s in string.gmatch(v .. ',', '([^,]*),') do
      if not LIST_STATES[s] or #out >= 16 then return nil end
      out[#out + 1] = s
    end
    return out
  end),
  'groupCount', ARG.count }
-- A group id as groupParse (lua/group.lua) accepts them.
local LIST_GROUP = { 'groupId', kind('a group id (1 to ' .. MAX_ID_LEN ..
  ' bytes, no "{", "}", whitespace or control characters)', function(v)
  if v ~= '' and #v <= MAX_ID_LEN and not string.find(v, '[{}%s%c]') then return v end
  return nil
end) }
-- The sorted sets that hold a state in the order its jobs run or finished.
local SORTED_STATE = { delayed = 'scheduled', prioritized = 'prioritized', completed = 'completed', failed = 'failed',
  ['waiting-children'] = 'waitingChildren' }

register('glidemq_getCounts', function(keys, args)
  local k = keysFor(keys[1])
  decodeArgs('glidemq_getCounts', args, COUNTS_ARGS)
  local streamLen, pending = 0, 0
  if redis.call('EXISTS', k.stream) == 1 then
    streamLen = redis.call('XLEN', k.stream)
    local p = redis.pcall('XPENDING', k.stream, GROUP)
    if type(p) == 'table' and not p.err then pending = toInt(p[1], 0) end -- no group yet: none pending
  end
  local listActive = toInt(redis.call('GET', k.listActive), 0)
  local groupWaiting = toInt(redis.call('HGET', k.meta, 'groupWaiting'), 0)
  if groupWaiting < 0 then groupWaiting = 0 end
  local waiting = streamLen - pending + redis.call('LLEN', k.lifo) + groupWaiting
  if waiting < 0 then waiting = 0 end
  return {
    waiting, pending + listActive, redis.call('ZCARD', k.scheduled), redis.call('ZCARD', k.prioritized),
    redis.call('ZCARD', k.completed), redis.call('ZCARD', k.failed), isPaused(k) and 1 or 0,
    listActive, pending, groupWaiting, redis.call('ZCARD', k.waitingChildren),
  }
end, { 'no-writes' })

-- A whole number as a command argument (a Lua number above 1e14 would go as '1e+15'; -0, which
-- an argument '-0' decodes to, as '0': the server refuses '-0').
local function whole(n)
  return string.format('%.0f', n + 0)
end

-- Appends to `out` up to `room` (nil: no limit) ids of the stream entries no worker has been
-- given yet (after the group's last delivery; every entry when there is no group yet).
local function undeliveredInto(k, out, room)
  if room == 0 or redis.call('EXISTS', k.stream) == 0 then return end
  local last = '0-0'
  local groups = redis.pcall('XINFO', 'GROUPS', k.stream)
  if type(groups) == 'table' and groups.err then error(groups) end
  for _, g in ipairs(groups) do
    local mine = false
    for i = 1, #g, 2 do
      if g[i] == 'name' then mine = g[i + 1] == GROUP end
      if g[i] == 'last-delivered-id' and mine then last = g[i + 1] end
    end
  end
  local entries
  if room then
    entries = redis.call('XRANGE', k.stream, '(' .. last, '+', 'COUNT', whole(room))
  else
    entries = redis.call('XRANGE', k.stream, '(' .. last, '+')
  end
  for _, e in ipairs(entries) do
    local fields = e[2]
    for i = 1, #fields, 2 do
      if fields[i] == 'id' then out[#out + 1] = fields[i + 1] break end
    end
  end
end

-- The waiting line in the order workers take it: LIFO jobs, stream entries not yet delivered, then
-- the waiting jobs of groups `gids`, group by group (a delayed job holding its place in an ordered
-- group's line is delayed, not waiting). `limit` (nil: all): at most that many from the front.
-- Also returns how many waiting group jobs the groups named hold, to compare with groupWaiting.
local function waitingLine(k, limit, gids)
  local ids = redis.call('LRANGE', k.lifo, 0, limit and whole(limit - 1) or -1)
  undeliveredInto(k, ids, limit and math.max(0, limit - #ids))
  local inGroups = 0
  for _, gid in ipairs(gids) do
    local gk, line = groupKeys(k, gid)
    local delayed = toInt(redis.call('HGET', gk, 'delayed'), 0)
    inGroups = inGroups + redis.call('ZCARD', line) - math.max(0, delayed)
    if not limit or #ids < limit then
      for _, id in ipairs(redis.call('ZRANGE', line, 0, -1)) do
        if limit and #ids >= limit then break end
        if delayed <= 0 or redis.call('HGET', jobKey(k, id), 'state') ~= 'delayed' then ids[#ids + 1] = id end
      end
    end
  end
  return ids, inGroups
end

-- Numeric ids by value, others by text: a stable order for claims made in the same ms.
local function idBefore(a, b)
  local na, nb = tonumber(a), tonumber(b)
  if na and nb and na ~= nb then return na < nb end
  if (na == nil) ~= (nb == nil) then return na ~= nil end
  return a < b
end

-- The active jobs, the one claimed first first: the jobs of every pending stream entry (whatever
-- their hash says: a claim prefetched, or delivered by a blocking read and not activated yet, is
-- one glidemq_getCounts counts as active) and the claimed priority/LIFO/group jobs.
local function activeIds(k)
  local ids, seen = {}, {}
  local function add(id)
    if id and not seen[id] then
      seen[id] = true
      ids[#ids + 1] = id
    end
  end
  if redis.call('EXISTS', k.stream) == 1 then
    local summary = redis.pcall('XPENDING', k.stream, GROUP)
    local n = type(summary) == 'table' and not summary.err and toInt(summary[1], 0) or 0 -- no group yet: none
    if n > 0 then
      for _, p in ipairs(redis.call('XPENDING', k.stream, GROUP, '-', '+', n)) do add(streamEntryJobId(k, p[1])) end
    end
  end
  for _, id in ipairs(redis.call('SMEMBERS', k.listActiveIds)) do
    local f = jobFieldsOrNil(jobKey(k, id), 'state', 'src')
    if f and isListClaim(f[1], f[2]) then add(id) end
  end
  local since = {}
  for _, id in ipairs(ids) do
    local f = jobFieldsOrNil(jobKey(k, id), 'processedOn')
    since[id] = f and tonumber(f[1]) or 0
  end
  table.sort(ids, function(a, b)
    if since[a] ~= since[b] then return since[a] < since[b] end
    return idBefore(a, b)
  end)
  return ids
end

-- `start`..`stop` of `ids` (inclusive, negative counting from the end), reversed first unless `asc`.
local function pageOf(ids, start, stop, asc)
  local n = #ids
  if start < 0 then start = math.max(0, n + start) end
  if stop < 0 then stop = n + stop end
  if stop > n - 1 then stop = n - 1 end
  local out = {}
  for i = start, stop do out[#out + 1] = asc and ids[i + 1] or ids[n - i] end
  return out
end

register('glidemq_listJobs', function(keys, args)
  local k = keysFor(keys[1])
  local a, groups = decodeArgs('glidemq_listJobs', args, LIST_ARGS, LIST_GROUP, 'groupCount')
  local gids = {}
  for i, g in ipairs(groups) do gids[i] = g.groupId end
  local out, complete = { 1 }, true
  local paused, line, active
  for _, state in ipairs(a.states) do
    local sorted = SORTED_STATE[state]
    local ids
    if sorted then
      if a.asc then
        ids = redis.call('ZRANGE', k[sorted], whole(a.start), whole(a.stop))
      else
        ids = redis.call('ZREVRANGE', k[sorted], whole(a.start), whole(a.stop))
      end
    elseif state == 'active' then
      active = active or activeIds(k)
      ids = pageOf(active, a.start, a.stop, a.asc)
    else
      if paused == nil then paused = isPaused(k) end
      if state == 'paused' and not paused then
        ids = {}
      else
        if not line then
          -- from the front, only what the page needs is read
          local limit = (a.asc and a.start >= 0 and a.stop >= 0) and a.stop + 1 or nil
          local inGroups
          line, inGroups = waitingLine(k, limit, gids)
          complete = complete and inGroups >= toInt(redis.call('HGET', k.meta, 'groupWaiting'), 0)
        end
        ids = pageOf(line, a.start, a.stop, a.asc)
      end
    end
    out[#out + 1] = ids
  end
  if not complete then out[1] = 0 end
  return out
end, { 'no-writes' })
end
