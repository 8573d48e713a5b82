--[[ epoch.lua — shared locals: how long the server has been serving (no registered functions).
  Why: a claim's idle time (the pending entries list's delivery time, or a list claim's lockedAt)
  is kept across a restart (AOF/RDB) and a failover (replicated), so it includes the time the
  server was down or not yet primary. A worker that was alive all along could not heartbeat in
  that time; its claim must not look stalled because of it. So stalled recovery counts a claim's
  age at most from the server's epoch: the start of the serving process (INFO server: run_id,
  uptime_in_seconds), or, on a replica promoted since the epoch was recorded (the recorded
  replication id is now this node's master_replid2), the first call that saw the promotion. Every
  live worker heartbeats within half a lock of the server being back, so no live claim reaches
  lockDuration of counted age; a dead worker's claim is reclaimed one lock after the epoch at the
  latest, later than it would have been, never earlier.
  The epoch is remembered in a hash the caller names (a queue's or a broadcast's meta key),
  fields epochId (run_id:replid) and epochAt (server ms), written (recordEpoch) only by a call that
  may write, and only after its last check: a refused call leaves the record as it was.
  A user whose ACL refuses INFO gets no epoch (age counts in full, as before): a denied INFO must
  not stop recovery.
  INFO is called with 'replication' as its first section: the roles' ACL rules allow exactly
  `INFO replication` (+info|replication, README "ACL roles"), and ACL checks only the first one.
  The id counter has its own epoch (replicationEpoch, used by lua/jobs.lua guardIdCounter).
]]
-- The ms the server has been serving at server TIME `now`, as stalled recovery may count it
-- against a claim (math.huge when INFO is refused). `recordKey`: the hash the epoch is kept in
-- (its type is checked by the caller). Second value: the epoch to record when it is not the one
-- kept (nil when it is), for recordEpoch once the caller can no longer refuse.
local function servingFor(recordKey, now)
  local info = redis.pcall('INFO', 'replication', 'server')
  if type(info) ~= 'string' then return math.huge end
  local runId = string.match(info, 'run_id:(%x+)')
  local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if not runId or not uptime then return math.huge end
  local id = runId .. ':' .. (string.match(info, 'master_replid:(%x+)') or '')
  local kept = redis.call('HMGET', recordKey, 'epochId', 'epochAt')
  local at = tonumber(kept[2])
  local fresh
  if kept[1] ~= id or not at then
    -- whole seconds of uptime, rounded down: a start taken as later than it was (only a delay)
    at = now - uptime * 1000
    local keptRepl = type(kept[1]) == 'string' and string.match(kept[1], ':(%x+)$')
    if keptRepl and keptRepl == string.match(info, 'master_replid2:(%x+)') then at = now end
    fresh = { id = id, at = at }
  end
  if at > now then return 0, fresh end
  return now - at, fresh
end

-- Keeps the epoch servingFor found new (nothing when it found the kept one).
local function recordEpoch(recordKey, fresh)
  if fresh then redis.call('HSET', recordKey, 'epochId', fresh.id, 'epochAt', fresh.at) end
end

-- The server's replication id (INFO replication: master_replid), which a primary gets new each
-- time its process starts (the one it had before becomes master_replid2) and each time it is
-- promoted; nil when the caller's ACL refuses INFO. It names the epoch of the job id counter.
local function replicationEpoch()
  local info = redis.pcall('INFO', 'replication')
  if type(info) ~= 'string' then return nil end
  return string.match(info, 'master_replid:(%x+)')
end
