--[[ release.lua — glidemq_release: gives back claims a worker holds but will not run (prefetched
  jobs at close, a job whose processor threw RateLimitError). Each owned claim is released and the
  job goes back first in line, as BullMQ's does: it was taken before every job still waiting (a
  group job goes back to its group).
  Every job hash is read, and the type of every key the release and requeue write checked,
  before the first write.
  KEYS[1]  meta key.
  ARGV[1]  consumer: the worker's consumer name.
  ARGV[2..]  groups of 2 arguments to the end of ARGV, one per claim, each:
    group.jobId: a job the worker holds.
    group.fence: the fence of its claim.
  Returns  the number of jobs given back (claims this consumer no longer owns are left alone).
  Errors   ERR_INVALID (an argument; an incomplete last group), ERR_WRONG_TYPE.
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
local RELEASE_HEAD = { 'consumer', ARG.nonEmpty }
local RELEASE_CLAIM = { 'jobId', ARG.jobId, 'fence', ARG.fence }

-- Puts a released job ahead of the jobs still waiting: first of its priority (sequence 0; adds
-- count from 1), else at the head of the LIFO list, which workers take before the stream.
local function requeueFirst(k, id, jk)
  local f = redis.call('HMGET', jk, 'priority', 'grp')
  if f[2] then return groupEnqueue(k, id, jk, f[2]) end
  local priority = toInt(f[1], 0)
  if priority > 0 then
    redis.call('ZADD', k.prioritized, priority * PRIORITY_SHIFT, id)
    redis.call('HSET', jk, 'state', 'prioritized')
  else
    redis.call('LPUSH', k.lifo, id)
    redis.call('HSET', jk, 'state', 'waiting')
    redis.call('HDEL', jk, 'sid') -- its stream entry is gone (releaseActive)
  end
  wakeWorkers(k)
end

register('glidemq_release', function(keys, args)
  local k = keysFor(keys[1])
  local a, claims = decodeArgs('glidemq_release', args, RELEASE_HEAD, RELEASE_CLAIM)
  -- check phase
  local seen = {}
  for _, c in ipairs(claims) do
    local jk = jobKey(k, c.jobId)
    local f = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'grp')
    if f[1] == 'active' and tonumber(f[2]) == c.fence and f[3] == a.consumer and not seen[c.jobId] then
      seen[c.jobId] = true
      c.jk = jk
      requireReleaseTypes(k, f[4])
      requireRequeueTypes(k, f[5] or nil)
    end
  end
  -- write phase: the last claim first, so that each pushed ahead keeps the claims' order
  local released = 0
  for i = #claims, 1, -1 do
    local c = claims[i]
    if c.jk then
      releaseActive(k, c.jobId, c.jk)
      requeueFirst(k, c.jobId, c.jk)
      released = released + 1
    end
  end
  return released
end)
end
