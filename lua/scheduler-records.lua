--[[ scheduler-records.lua — reading scheduler records (no registered functions here):
  dueSchedulers (used by glidemq_upkeep), decodeSchedulerRecord and schedulerSlotAfter
  (lua/schedulers.lua). The record format is described in lua/schedulers.lua.
]]
-- Defined in the block below, whose other locals stay inside it (the main chunk may hold at most 200).
local schedulerNextRun, dueSchedulers, decodeSchedulerRecord, schedulerSlotAfter
do
local SCHEDULERS_DUE_LIMIT = 100
local SCHEDULER_MIN_EVERY_MS = 1000 -- the shortest interval (src/engine/scheduling/schedulers.ts MIN_EVERY_MS agrees)
-- Times and intervals in a record: cjson writes numbers with 14 significant digits, so larger
-- ones would not read back as they were (ms since the epoch stay below this until the year 5138).
local SCHEDULER_MAX_MS = 99999999999999

schedulerNextRun = function(v)
  local n = string.match(v, '"nextRun":(%d+)')
  if n then return tonumber(n) end
  local ok, rec = pcall(cjson.decode, v)
  if ok and type(rec) == 'table' then return tonumber(rec.nextRun) end
  return nil
end

-- Due schedulers (flat name, record list, at most SCHEDULERS_DUE_LIMIT) and the earliest
-- nextRun among the rest (-1 when none). `now` is the server's time. Reads only.
dueSchedulers = function(k, now)
  local due, nextDue = {}, -1
  if redis.call('EXISTS', k.schedulers) == 0 then return due, nextDue end
  local all = redis.call('HGETALL', k.schedulers)
  for i = 1, #all, 2 do
    local at = schedulerNextRun(all[i + 1])
    if at then
      if at <= now and #due < SCHEDULERS_DUE_LIMIT * 2 then
        due[#due + 1] = all[i]
        due[#due + 1] = all[i + 1]
      elseif nextDue < 0 or at < nextDue then
        nextDue = at
      end
    end
  end
  return due, nextDue
end

--[[ Reads a scheduler record (JSON text) into a new table holding only the known fields, each
  checked: the table can be stored again with cjson.encode whatever the text held (no NaN, no
  sparse arrays, no foreign fields), and a job added from its template passes glidemq_add's checks.
  `timing` is derived here from pattern/tz or every (never taken from the text). Returns the
  record, or nil and what is wrong with it. ]]
decodeSchedulerRecord = function(v)
  local ok, t = pcall(cjson.decode, v)
  if not ok or type(t) ~= 'table' then return nil, 'not a JSON object' end
  local function whole(x, min, max)
    return type(x) == 'number' and x >= min and x <= max and x == math.floor(x)
  end
  local function str(x, nonEmpty)
    return type(x) == 'string' and (not nonEmpty or x ~= '')
  end
  local rec = {}
  local hasPattern, hasEvery = t.pattern ~= nil and t.pattern ~= cjson.null, t.every ~= nil and t.every ~= cjson.null
  if hasPattern == hasEvery then return nil, 'needs either pattern or every, not ' .. (hasPattern and 'both' or 'neither') end
  if hasPattern then
    if not str(t.pattern, true) or #t.pattern > 256 then return nil, 'pattern must be a cron pattern (1..256 bytes)' end
    if t.tz ~= nil and t.tz ~= cjson.null and not (str(t.tz, true) and #t.tz <= 64) then
      return nil, 'tz must be a time zone name (1..64 bytes)'
    end
    rec.pattern = t.pattern
    if str(t.tz, true) then rec.tz = t.tz end
    rec.timing = 'cron:' .. rec.pattern .. '@' .. (rec.tz or 'UTC')
  else
    if not whole(t.every, SCHEDULER_MIN_EVERY_MS, SCHEDULER_MAX_MS) then
      return nil, 'every must be a whole number of ms from ' .. SCHEDULER_MIN_EVERY_MS .. ' to ' .. SCHEDULER_MAX_MS
    end
    rec.every = t.every
    rec.timing = 'every:' .. string.format('%.0f', rec.every)
  end
  if not whole(t.nextRun, 0, SCHEDULER_MAX_MS) then return nil, 'nextRun must be a whole number of ms from 0 to ' .. SCHEDULER_MAX_MS end
  rec.nextRun = t.nextRun
  for _, f in ipairs({ 'anchor', 'lastRun', 'createdAt', 'updatedAt', 'startDate' }) do
    if t[f] ~= nil and t[f] ~= cjson.null then
      if not whole(t[f], 0, SCHEDULER_MAX_MS) then return nil, f .. ' must be a whole number of ms from 0 to ' .. SCHEDULER_MAX_MS end
      rec[f] = t[f]
    end
  end
  if str(t.name) then rec.name = t.name end
  if str(t.lastJobId, true) then rec.lastJobId = t.lastJobId end
  local j = t.job
  if type(j) ~= 'table' then return nil, 'job must be an object' end
  if not str(j.name, true) or #j.name > MAX_JOB_NAME_LEN then
    return nil, 'job.name must be a non-empty string of at most ' .. MAX_JOB_NAME_LEN .. ' bytes'
  end
  if not str(j.data) then return nil, 'job.data must be a string (JSON text)' end
  if not whole(j.delay, 0, SCHEDULER_MAX_MS) then return nil, 'job.delay must be a whole number of ms from 0 to ' .. SCHEDULER_MAX_MS end
  if not whole(j.priority, 0, MAX_PRIORITY) then return nil, 'job.priority must be a whole number from 0 to ' .. MAX_PRIORITY end
  if j.lifo ~= '0' and j.lifo ~= '1' then return nil, "job.lifo must be '0' or '1'" end
  if j.priority > 0 and j.lifo == '1' then return nil, 'a job cannot be both prioritized and LIFO' end
  if not whole(j.attempts, 1, MAX_SAFE_INT) then return nil, 'job.attempts must be a whole number >= 1' end
  local opts = j.opts
  if opts == nil or opts == cjson.null then opts = '' end
  if not str(opts) then return nil, "job.opts must be '' or a JSON object as text" end
  if not JOB_OPTS.check(opts) then return nil, 'job.opts must be ' .. JOB_OPTS.expect() .. ' as text' end
  rec.job = { name = j.name, data = j.data, delay = j.delay, priority = j.priority, lifo = j.lifo,
    attempts = j.attempts, opts = opts }
  return rec
end

-- The first slot of an interval scheduler strictly after `now`: anchor + k * every.
schedulerSlotAfter = function(rec, now)
  local anchor = rec.anchor or rec.nextRun
  local n = math.floor((now - anchor) / rec.every) + 1
  if n < 1 then n = 1 end
  return anchor + n * rec.every
end
end
