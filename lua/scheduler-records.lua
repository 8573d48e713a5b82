--[[ scheduler-records.lua — reading scheduler records (no registered functions here):
  dueSchedulers (used by glidemq_upkeep) and decodeSchedulerRecord (lua/schedulers.lua).
  The record format is described in lua/schedulers.lua.
]]
local SCHEDULERS_DUE_LIMIT = 100

local function schedulerNextRun(v)
  local n = string.match(v, '"nextRun":(%d+)')
  if n then return tonumber(n) end
  local ok, rec = pcall(cjson.decode, v)
  if ok and type(rec) == 'table' then return tonumber(rec.nextRun) end
  return nil
end

-- Due schedulers (flat name, record list, at most SCHEDULERS_DUE_LIMIT) and the earliest
-- nextRun among the rest (-1 when none).
local function dueSchedulers(k, now)
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

local function decodeSchedulerRecord(v)
  local ok, rec = pcall(cjson.decode, v)
  if not ok or type(rec) ~= 'table' or type(rec.job) ~= 'table' then return nil end
  if type(rec.nextRun) ~= 'number' or type(rec.job.name) ~= 'string' or type(rec.job.data) ~= 'string' then return nil end
  return rec
end

