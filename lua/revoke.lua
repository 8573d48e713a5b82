--[[ revoke.lua — glidemq_revoke: stop a job from any process (queue.revoke, `glidemq cancel`).
  Decided here, on the server, so a worker that is offline at the time still obeys when it next
  renews its locks:
    - a job that has not started (waiting, prioritized, LIFO, delayed, in its group's line, or a
      parent waiting for its children) never runs: it leaves the structure that holds it and is
      failed for good with failedReason 'revoked' (no retry, whatever attempts are left), stored,
      kept or removed by its removeOnFail, announced ('failed') and settling its parents as a
      processor's failure for good would (lua/outcomes.lua storeFailure);
    - a running job (state active: running, or prefetched by a worker) is flagged: its hash's
      `revoked` holds the fence of the claim that runs it. The heartbeat reports a flagged claim
      to the worker that holds it (lua/progress.lua glidemq_extendLocks), which aborts the run's
      AbortSignal; a failure of that claim then fails the job for good as 'revoked'
      (lua/finish.lua), while a completion stands (the work was done). The flag holds for that
      claim and every later one: a claim given back (a worker's close) or redispatched (a stall)
      carries the field in its claim reply, and its worker fails it unrun; a job retried by hand
      (lua/job-edit.lua) loses the flag and runs as any other;
    - a job already completed or failed is left as it is.
  A repeated revoke has the effect of one: a job this call revoked answers 'revoked' again (its
  failedReason says so), a flagged claim 'flagged' again.
  Times (finishedOn, the failed set's score, retention by age) are the server's TIME.

  glidemq_revoke
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job to revoke.
  ARGV[2]  dryRun: '1' only answers what the call would do, writing nothing (`glidemq cancel
           --dry-run`); '0' does it.
  Returns  'revoked' (it will never run: failed as revoked, or revoked before), 'flagged' (it runs:
           the worker that runs it is told at its next lock renewal), 'finished' (it completed,
           or failed for another reason, before: nothing changed) or 'not_found' (no such job).
  Errors   ERR_INVALID (jobId), ERR_WRONG_TYPE (the job key or a key it writes holds another type).
]]
do
local REVOKE_ARGS = { 'jobId', ARG.jobId, 'dryRun', ARG.flag }
local REVOKED = 'revoked'
-- Every structure a job that has not started may be in, and what a failure for good writes.
local REVOKE_WRITES = { 'meta', 'hash', 'stream', 'stream', 'scheduled', 'zset', 'prioritized', 'zset', 'lifo', 'list',
  'waitingChildren', 'zset', 'readyGroups', 'zset', 'timedGroups', 'zset', 'wake', 'stream', 'events', 'stream' }
-- The states of a job that has not started, each the structure that holds it.
local NOT_STARTED = { waiting = true, prioritized = true, delayed = true, ['waiting-children'] = true }

-- Takes job `id` (hash `jk`, state `state`) out of every structure that holds a job waiting to
-- run: the stream entry (acked too, in case a worker's read was delivered it and has not activated
-- it yet: its activation then finds the job failed and drops the entry, lua/activate.lua), the
-- priority set, the LIFO list, the scheduled set, its group's line, the parents' waiting set.
local function unplace(k, id, jk, sid)
  if sid then
    redis.call('XACK', k.stream, GROUP, sid)
    redis.call('XDEL', k.stream, sid)
  end
  redis.call('ZREM', k.prioritized, id)
  redis.call('LREM', k.lifo, 0, id)
  redis.call('ZREM', k.scheduled, id)
  redis.call('ZREM', k.waitingChildren, id)
  groupForget(k, id, jk)
  redis.call('HDEL', jk, 'sid')
end

register('glidemq_revoke', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_revoke', args, REVOKE_ARGS)
  local id = a.jobId
  local jk = jobKey(k, id)
  -- check phase: the job's hash (raises on a key of another type), then the keys to be written
  local f = redis.call('HMGET', jk, 'state', 'fence', 'failedReason', 'sid', 'grp', 'opts', 'attemptsMade', 'parents', 'revoked')
  local state = f[1]
  if not state then return 'not_found' end
  if state == 'completed' or state == 'failed' then
    return (state == 'failed' and f[3] == REVOKED) and REVOKED or 'finished'
  end
  if state == 'active' then
    -- the claim that runs now is flagged (a repeat finds the flag and writes nothing)
    local fence = f[2] or '0'
    if not f[9] and not a.dryRun then redis.call('HSET', jk, 'revoked', fence) end
    return 'flagged'
  end
  if not NOT_STARTED[state] then return 'finished' end
  if a.dryRun then return REVOKED end
  requireTypes(k, REVOKE_WRITES)
  local keep = keepRuleFor(f[6] or nil, '')
  requireTypes(k, keep ~= '0' and FAILURE_TYPES.kept or FAILURE_TYPES.removed)
  if f[5] then groupRequireTypes(k, f[5]) end
  local flowKind = f[8] and FLOW.failureKind(f[6] or nil)
  if flowKind then FLOW.checkParents(k, f[8], flowKind) end
  FAILURE_TYPES.dead.target(k) -- a dead-letter queue's keys (lua/dead-letters.lua), checked before the first write
  -- write phase
  local now = serverNow()
  unplace(k, id, jk, f[4] or nil)
  -- (a parent's dependencies stay: its children run on and settle into a parent that waits no more)
  storeFailure(k, jk, id, keep, now, toInt(f[7], 0), REVOKED, listening(k, now))
  if flowKind then FLOW.settleParents(k, jk, f[8], flowKind, REVOKED, now) end
  return REVOKED
end)
end
