--[[ search.lua — glidemq_searchJobs: the jobs of one state whose failure reason, name or data holds
  a text (Queue.search, `glidemq jobs --grep`). Read-only (runs on a replica too).
  Why on the server, a step at a time: a failed set may hold a million jobs; downloading them to
  look for a word costs the network and the client's memory. Each call looks at `count` entries of
  the state from a cursor and returns what matched and where to go on, as SCAN does, so no call is
  long and nothing but the matches leaves the server. The cursor is a position: a state that
  changes between calls may show a job twice or pass one by, as any paged listing may.
  What is looked at, per state:
    completed, failed, delayed, prioritized, waiting-children: the state's sorted set, newest (or
      due last) first; the cursor is the rank reached.
    waiting (paused: the same jobs, only while the queue is paused): the LIFO list, then the job
      stream's entries not yet delivered to a worker; waiting jobs of groups are not looked at
      (no queue key lists them: Queue.getJobs finds them by SCAN).
    active: the pending entries of the job stream, then the claimed priority/LIFO/group jobs.
  The match is plain text (no pattern), ignoring ASCII case, in the job hash's failedReason, name
  and data fields as stored (data is its JSON text).

  glidemq_searchJobs (read-only) — one step of a search.
  KEYS[1]  meta key.
  ARGV[1]  state: waiting, paused, active, delayed, prioritized, completed, failed or waiting-children.
  ARGV[2]  text: 1 to 1024 bytes to find.
  ARGV[3]  cursor: '0' to start, else the cursor the last call returned (for the same state).
  ARGV[4]  count: entries of the state looked at by this call, at most (1..1000).
  Returns  {cursor, id1, id2, ...}: where the next call goes on ('0': the state was looked at to
           its end), then the ids of the jobs that matched, in the order looked at.
  Errors   ERR_INVALID (an argument, named; a cursor another state returned), ERR_WRONG_TYPE (a key
           it reads holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local MAX_TEXT = 1024 -- bytes of the text searched for
local SEARCH_SORTED = { delayed = 'scheduled', prioritized = 'prioritized', completed = 'completed', failed = 'failed',
  ['waiting-children'] = 'waitingChildren' }
local SEARCH_TYPES = { 'lifo', 'list', 'stream', 'stream', 'listActiveIds', 'set', 'scheduled', 'zset',
  'prioritized', 'zset', 'completed', 'zset', 'failed', 'zset', 'waitingChildren', 'zset' }
local SEARCH_ARGS = {
  'state', ARG.oneOf('waiting', 'paused', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'waiting-children'),
  'text', kind('1 to ' .. MAX_TEXT .. ' bytes', function(v)
    if v ~= '' and #v <= MAX_TEXT then return v end
    return nil
  end),
  -- '0', or a phase letter and its position (checked against the state below)
  'cursor', kind("'0' or a cursor glidemq_searchJobs returned", function(v)
    if v == '0' or string.find(v, '^[zl]%d+$') or string.find(v, '^[ps]%d+%-%d+$') or string.find(v, '^a%d+$') then return v end
    return nil
  end),
  'count', ARG.int(1, 1000),
}
-- The phases of each state, by the cursor's first letter: z sorted set rank, l LIFO list index,
-- s stream entry id (exclusive), p pending entry id (exclusive), a SSCAN cursor.
local SEARCH_PHASES = { waiting = 'ls', paused = 'ls', active = 'pa' }

-- Whether job `id`'s failedReason, name or data holds `needle` (lower case), ignoring case.
local function searchMatches(k, id, needle)
  local f = jobFieldsOrNil(jobKey(k, id), 'failedReason', 'name', 'data')
  if not f then return false end
  for i = 1, 3 do
    local v = f[i]
    if v and string.find(string.lower(v), needle, 1, true) then return true end
  end
  return false
end

-- The job group's last delivered id of the job stream ('0-0' when there is no group yet).
local function searchLastDelivered(k)
  local groups = redis.pcall('XINFO', 'GROUPS', k.stream)
  if type(groups) == 'table' and groups.err then return '0-0' end
  for _, g in ipairs(groups) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    if name == GROUP then return last or '0-0' end
  end
  return '0-0'
end

-- The later of stream entry ids `a` and `b` (by number: a cursor may carry leading zeros).
local function searchLaterId(a, b)
  local ams, aseq = string.match(a, '^(%d+)%-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)%-(%d+)$')
  ams, aseq, bms, bseq = tonumber(ams), tonumber(aseq), tonumber(bms), tonumber(bseq)
  if ams > bms or (ams == bms and aseq > bseq) then return a end
  return b
end

-- One step of phase `phase` from position `pos`: the ids looked at and the next cursor of the
-- phase (nil: the phase is done).
local function searchStep(k, state, phase, pos, count)
  if phase == 'z' then
    local from = tonumber(pos)
    local ids = redis.call('ZREVRANGE', k[SEARCH_SORTED[state]], from, from + count - 1)
    return ids, (#ids == count) and ('z' .. string.format('%.0f', from + count)) or nil
  elseif phase == 'l' then
    local from = tonumber(pos)
    local ids = redis.call('LRANGE', k.lifo, from, from + count - 1)
    return ids, (#ids == count) and ('l' .. string.format('%.0f', from + count)) or nil
  elseif phase == 's' then
    if redis.call('EXISTS', k.stream) == 0 then return {}, nil end
    local last = searchLastDelivered(k)
    local after = searchLaterId(pos, last)
    local entries = redis.call('XRANGE', k.stream, '(' .. after, '+', 'COUNT', count)
    local ids = {}
    for _, e in ipairs(entries) do
      local fields = e[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'id' then ids[#ids + 1] = fields[i + 1] break end
      end
    end
    return ids, (#entries == count) and ('s' .. entries[#entries][1]) or nil
  elseif phase == 'p' then
    if redis.call('EXISTS', k.stream) == 0 then return {}, nil end
    local pending = redis.pcall('XPENDING', k.stream, GROUP, '(' .. pos, '+', count)
    if type(pending) == 'table' and pending.err then return {}, nil end -- no group yet: none pending
    local ids = {}
    for _, p in ipairs(pending) do ids[#ids + 1] = streamEntryJobId(k, p[1]) end
    return ids, (#pending == count) and ('p' .. pending[#pending][1]) or nil
  end
  -- 'a': the claimed priority/LIFO/group jobs
  local r = redis.call('SSCAN', k.listActiveIds, pos, 'COUNT', count)
  local ids = {}
  for _, id in ipairs(r[2]) do
    local f = jobFieldsOrNil(jobKey(k, id), 'state', 'src')
    if f and isListClaim(f[1], f[2]) then ids[#ids + 1] = id end
  end
  return ids, (r[1] ~= '0') and ('a' .. r[1]) or nil
end

-- The cursor that starts phase `phase`.
local function searchPhaseStart(phase)
  if phase == 's' or phase == 'p' then return phase .. '0-0' end
  return phase .. '0'
end

-- The first cursor of `state`'s phase after `phase` (nil: it has none).
local function searchNextPhase(state, phase)
  local phases = SEARCH_PHASES[state] or 'z'
  local at = string.find(phases, phase, 1, true)
  local nextPhase = string.sub(phases, at + 1, at + 1)
  if nextPhase == '' then return nil end
  return searchPhaseStart(nextPhase)
end

register('glidemq_searchJobs', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_searchJobs', args, SEARCH_ARGS)
  requireTypes(k, SEARCH_TYPES)
  local phases = SEARCH_PHASES[a.state] or 'z'
  local cursor = a.cursor
  if cursor == '0' then cursor = searchPhaseStart(string.sub(phases, 1, 1)) end
  local phase, pos = string.sub(cursor, 1, 1), string.sub(cursor, 2)
  if not string.find(phases, phase, 1, true) then
    refuse('ERR_INVALID', 'glidemq_searchJobs: cursor must be one a search of state ' .. a.state .. ' returned, got ' .. showArg(a.cursor))
  end
  if a.state == 'paused' and not isPaused(k) then return { '0' } end
  local ids, nextCursor = searchStep(k, a.state, phase, pos, a.count)
  local out = { nextCursor or searchNextPhase(a.state, phase) or '0' }
  local needle = string.lower(a.text)
  for _, id in ipairs(ids) do
    if id and searchMatches(k, id, needle) then out[#out + 1] = id end
  end
  return out
end, { 'no-writes' })
end
