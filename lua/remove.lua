--[[ remove.lua — removing jobs: glidemq_removeJob, glidemq_drain, glidemq_clean, glidemq_cleanJobs
  A job hash goes last, after every structure that names it: a structure that still names a
  removed id drops it when it meets it, so a removed job is never re-created by a late write.
  Each function reads every job hash it will remove (a job key of another type raises
  ERR_WRONG_TYPE there) and checks the type of every queue and group key it may write, all before
  the first write, so a refused call writes nothing.
  A removed job's dedup id is forgotten if it still points at the job, as BullMQ's removal deletes
  its key: the next add with it creates a job.
  A removed group job leaves its group's line (a waiting job, or a delayed one holding its place
  in an ordered group's line); a removed job that held its group (heldBy, or the head of the line)
  frees it and wakes a worker for it (lua/group.lua groupForget).

  glidemq_removeJob
    KEYS[1]  meta key.
    ARGV[1]  jobId: the job to remove.
    ARGV[2]  force: '1' also removes an active job (its claim is released), '0' refuses one.
    ARGV[3]  children: '1' a parent goes with its unfinished subtree (BullMQ's removeChildren,
             the default), '0' its children stay and no longer name it among their parents.
    A parent is removed with its unfinished children (those still among its dependencies) and
    theirs, in every queue, as BullMQ removes a parent's children, refused whole while one of them
    is being processed (force '0'); a removed child settles its other parents as a removed
    dependency (lua/flow-keys.lua). On a cluster a child in another queue is in another slot: the
    call writes an outbox record for it in this queue (lua/flow-keys.lua), which the caller relays
    (glidemq_parentRemoved in the child's queue; upkeep and heal relay what a crash left). The
    caller checks beforehand that no such child is being processed (src/engine/jobs/job-removal.ts).
    Returns  1 when removed, 0 when there was no such job.
    Errors   ERR_JOB_ACTIVE (the job, or a child of its subtree, is being processed and force is '0'), ERR_INVALID (jobId,
             force, children), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_parentRemoved — what a parent removed in another slot (a cluster) owes its children in
  this queue: the relay of the outbox records glidemq_removeJob wrote (src/engine/producing/flow-outbox.ts).
    KEYS[1]  meta key of the children's queue.
    ARGV[1]  count: how many follow (1..10000), each a group of 3 arguments:
      group.childId: the child's job id.
      group.parentKey: the removed parent's job key.
      group.action: 'remove' (the child goes with its unfinished subtree, as glidemq_removeJob with
             force removes it: the parent's removal was checked and done) or 'unlink' (the child
             stays and no longer names the parent).
    A child that no longer names the parent (removed, or unlinked before) is left: a record
    relayed twice changes nothing.
    Returns  {changed, relay}: changed the children removed or unlinked; relay 1 when it wrote
             outbox records (a removed child's own children, or other parents, in other slots).
    Errors   ERR_INVALID (an argument, named with its group), ERR_WRONG_TYPE (a key it writes holds
             another type).

  glidemq_drain
    KEYS[1]  meta key.
    ARGV[1]  includeDelayed: '1' also removes delayed jobs, '0' leaves them.
    ARGV[2]  limit: jobs removed per call (1..10000).
    ARGV[3]  dryRun: '1' only counts what would be removed (all of it, not one call's share).
    ARGV[4]  groupCount: how many group ids follow (0..10000), each:
      group.groupId: a group whose waiting jobs are removed too (1..256 bytes, no "{", "}",
             whitespace or control characters). The caller finds the groups that have a line
             by SCAN (src/engine/administering/cleanup.ts): no queue key lists them all (a full group is in
             neither ready- nor timed-groups).
    Removes up to `limit` jobs that wait, exactly those glidemq_getCounts counts as waiting or as
    prioritized (stream entries not yet delivered, LIFO, prioritized, the waiting jobs of the
    groups named), and delayed jobs when asked (a delayed job holding its place in an ordered
    group's line is one of them: removing it frees the group). Active jobs are left alone, with
    their group slots. A group emptied is taken out of ready- and timed-groups.
    Returns  {removed (or would remove), more (1 when jobs are left to drain)}. A dry run counts
             the waiting group jobs of every group (meta's groupWaiting, as glidemq_getCounts),
             whether named or not.
    Errors   ERR_INVALID (an argument, named), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_clean
    KEYS[1]  meta key.
    ARGV[1]  state: 'completed' or 'failed', the set to clean.
    ARGV[2]  graceMs: jobs that finished within this many ms before the server's TIME are kept.
    ARGV[3]  limit: jobs removed per call (1..10000).
    ARGV[4]  dryRun: '1' only lists what would be removed.
    ARGV[5]  offset: the old enough jobs to pass over first (0..2^53-1): a dry run removes
             nothing, so it pages on with the count it has listed (a real run passes 0).
    The age is the server's: finished jobs are scored with the server's TIME, and compared with
    the server's TIME here (no caller's clock decides what is old enough). A finished group job
    is in no group's line and holds no slot: its group is left as it is.
    Returns  the ids removed (or that would be), oldest first. Emits 'cleaned' (count) when it removed any,
             and 'removed' (prev: the state) for each job, as every removal does.
    Errors   ERR_INVALID (an argument, named), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_cleanJobs
    KEYS[1]  meta key.
    ARGV[1]  state: 'wait' (waiting jobs), 'paused' (the waiting jobs of a paused queue, those
             getJobCounts counts as paused), 'delayed' or 'prioritized'.
    ARGV[2]  graceMs: jobs younger than this many ms before the server's TIME are kept.
    ARGV[3]  limit: jobs removed at most (1..10000).
    ARGV[4]  dryRun: '1' only lists what would be removed.
    ARGV[5]  jobCount: how many job ids follow (0..10000), each:
      group.jobId: a job to remove if it is in `state` and old enough. The caller lists the jobs of
             the structures that hold the state (src/engine/administering/cleanup.ts), a page at a time; this
             function decides from each job's hash alone (its state, and its age on the server's
             clock), so a listed job that moved on or was removed meanwhile is left alone.
    A job's age counts from the first of finishedOn, processedOn and ts it has (a waiting job),
    processedOn and ts (delayed), ts (prioritized): the time it last changed hands, as BullMQ's
    clean measures it. Jobs are removed as removeJob removes them (dropJob: a group job leaves its
    group's line and frees what it held). Nothing is removed from a queue that is not paused when
    `state` is 'paused'. Active jobs are never removed here.
    Returns  the ids removed (or that would be), in the order named. Emits 'cleaned' (count) when
             it removed any, and 'removed' (prev: the state) for each job.
    Errors   ERR_INVALID (an argument, named), ERR_WRONG_TYPE (a key it writes, or a job key
             named, holds another type).
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local REMOVE_JOB_ARGS = { 'jobId', ARG.jobId, 'force', ARG.flag, 'children', ARG.flag }
local PARENT_REMOVED_HEAD = { 'count', ARG.int(1, MAX_COUNT) }
local PARENT_REMOVED_EACH = { 'childId', ARG.jobId, 'parentKey', kind('a job key', function(v)
  if FLOW.splitJobKey(v) then return v end
  return nil
end), 'action', ARG.oneOf('remove', 'unlink') }
local OUTBOX_TYPES = { 'flowOutbox', 'hash' }
local DRAIN_ARGS = { 'includeDelayed', ARG.flag, 'limit', ARG.int(1, MAX_COUNT), 'dryRun', ARG.flag,
  'groupCount', ARG.count }
-- A group id as groupParse (lua/group.lua) accepts them.
local DRAIN_GROUP = { 'groupId', kind('a group id (1 to ' .. MAX_ID_LEN ..
  ' bytes, no "{", "}", whitespace or control characters)', function(v)
  if v ~= '' and #v <= MAX_ID_LEN and not string.find(v, '[{}%s%c]') then return v end
  return nil
end) }
local CLEAN_ARGS = { 'state', ARG.oneOf('completed', 'failed'), 'graceMs', ARG.ms, 'limit', ARG.int(1, MAX_COUNT),
  'dryRun', ARG.flag, 'offset', ARG.int(0, MAX_SAFE_INT) }
local CLEAN_JOBS_ARGS = { 'state', ARG.oneOf('wait', 'paused', 'delayed', 'prioritized'), 'graceMs', ARG.ms,
  'limit', ARG.int(1, MAX_COUNT), 'dryRun', ARG.flag, 'jobCount', ARG.count }
local CLEAN_JOBS_EACH = { 'jobId', ARG.jobId }
-- The job states each cleanJobs state takes, and the hash fields a job's age is read from (the
-- first one set), per job state.
local CLEAN_JOB_STATES = { wait = { waiting = true }, paused = { waiting = true },
  delayed = { delayed = true }, prioritized = { prioritized = true } }
local CLEAN_AGE_FIELDS = { waiting = { 'finishedOn', 'processedOn', 'ts' }, delayed = { 'processedOn', 'ts' },
  prioritized = { 'ts' } }
-- Every structure dropJob and a released claim touch: the job's places, its group's sets (meta
-- keeps groupWaiting/groupTurn; a released group slot wakes workers), list-active, events.
local REMOVE_WRITES = { 'meta', 'hash', 'stream', 'stream', 'wake', 'stream', 'events', 'stream', 'scheduled', 'zset',
  'prioritized', 'zset', 'lifo', 'list', 'completed', 'zset', 'failed', 'zset', 'readyGroups', 'zset',
  'timedGroups', 'zset', 'listActiveIds', 'set', 'listActive', 'string', 'dedup', 'hash', 'waitingChildren', 'zset' }

-- Reads what removing job `id` needs (raises on a job key of another type); checks its group's
-- keys. Returns its state (nil when there is no such job).
local function readForRemoval(k, jk)
  local f = redis.call('HMGET', jk, 'state', 'grp', 'parents')
  if f[1] and f[2] then groupRequireTypes(k, f[2]) end
  -- a removed child settles its parents as a removed dependency (lua/flow-keys.lua)
  if f[3] then FLOW.checkParents(k, f[3], 'remove') end
  return f[1] or nil
end

-- Forgets the dedup id a removed job was added with if it still points at the job (BullMQ
-- deletes its key then too): the next add with it creates a job. The id is in the job's stored
-- options (src/engine/producing/options.ts storedDedup); opts another program wrote are read with pcall.
local function forgetDedupOf(k, id, opts)
  if not opts or not string.find(opts, 'dedup', 1, true) then return end
  local ok, o = pcall(cjson.decode, opts)
  if not ok or type(o) ~= 'table' then return end
  local d = o.deduplication or o.dedup
  local dedupId = type(d) == 'table' and d.id
  if type(dedupId) ~= 'string' then return end
  local v = redis.call('HGET', k.dedup, dedupId)
  if not v then return end
  local _, _, pointsAt = parseDedupEntry(v)
  if pointsAt == id then redis.call('HDEL', k.dedup, dedupId) end
end

-- Removes a job that is not active from every structure, then its hash and logs. `lineGid`: the
-- group whose line listed it (drain), for an entry whose job hash is gone.
-- Returns true when it wrote an outbox record (a parent in another slot: a cluster).
local function dropJob(k, id, jk, lineGid)
  local f = redis.call('HMGET', jk, 'sid', 'state', 'opts', 'parents')
  local wrote = false
  if f[4] then wrote = FLOW.settleParents(k, jk, f[4], 'remove', '', serverNow()) end
  if f[2] == 'waiting-children' then redis.call('ZREM', k.waitingChildren, id) end
  forgetDedupOf(k, id, f[3])
  local sid = f[1]
  if sid then redis.call('XDEL', k.stream, sid) end
  groupForget(k, id, jk, lineGid)
  redis.call('ZREM', k.scheduled, id)
  redis.call('ZREM', k.prioritized, id)
  redis.call('LREM', k.lifo, 0, id)
  redis.call('ZREM', k.completed, id)
  redis.call('ZREM', k.failed, id)
  redis.call('DEL', jk, jk .. ':logs', jk .. ':deps', jk .. ':processed', jk .. ':failed', jk .. ':ignored')
  emit(k, 'removed', id, 'prev', f[2] or 'unknown')
  return wrote
end

-- The unfinished children of parent `jk` (those still in its deps) and theirs, in the order
-- found, appended to `out` as { k, id, jk }: every child this call reaches (its queue's; on a
-- standalone server any queue's, FLOW.reachesEveryQueue). A child in another queue on a cluster is
-- in another slot: appended to `away` as { child, parent }, for the outbox. `k` is the call's
-- queue (other queues' key tables are kept on it, FLOW.queueOf).
local function unfinishedSubtree(k, jk, out, seen, away)
  for _, child in ipairs(redis.call('SMEMBERS', FLOW.depsOf(jk))) do
    local base, id = FLOW.splitJobKey(child)
    if base and not seen[child] then
      seen[child] = true
      if base == k.base or FLOW.reachesEveryQueue() then
        out[#out + 1] = { k = FLOW.queueOf(k, base), id = id, jk = child }
        unfinishedSubtree(k, child, out, seen, away)
      else
        away[#away + 1] = { child = child, parent = jk }
      end
    end
  end
  return out
end

-- Drops `parentKey` from the parents job `jk` names (its parent was removed without it): with
-- none left it is no child any more (its `parents` field says so). Returns true when it named it.
local function unlinkParent(jk, parentKey)
  local f = redis.call('HMGET', jk, 'parents', 'flow')
  if not f[1] then return false end
  local rest, named = {}, false
  for _, p in ipairs(FLOW.words(f[1])) do
    if p == parentKey then named = true else rest[#rest + 1] = p end
  end
  if not named then return false end
  if #rest > 0 then
    redis.call('HSET', jk, 'parents', table.concat(rest, ' '))
  else
    redis.call('HDEL', jk, 'parents')
    if FLOW.hasChildren(f[2]) then redis.call('HSET', jk, 'flow', 'p') else redis.call('HDEL', jk, 'flow') end
  end
  return true
end

--[[ Reads and checks (no write) the removal of job `id` (hash `jk`, state `state`) of queue `k`:
  `withChildren`, its unfinished subtree goes too (plan.nodes); else its children stay and are
  unlinked (plan.linked). Children in another slot go to plan.away (outbox records). Returns the
  plan, or nil and the node being processed when one is and `force` is false. ]]
local function planRemoval(k, id, jk, state, withChildren, force)
  local plan = { k = k, id = id, jk = jk, state = state, withChildren = withChildren, nodes = {}, linked = {}, away = {} }
  if withChildren then
    unfinishedSubtree(k, jk, plan.nodes, { [jk] = true }, plan.away)
    for _, c in ipairs(plan.nodes) do
      requireTypes(c.k, REMOVE_WRITES)
      c.state = readForRemoval(c.k, c.jk)
      if c.state == 'active' and not force then return nil, c end
    end
  else
    for _, child in ipairs(redis.call('SMEMBERS', FLOW.depsOf(jk))) do
      local base = FLOW.splitJobKey(child)
      if base == k.base or (base and FLOW.reachesEveryQueue()) then
        requireKeyType(child, 'hash')
        plan.linked[#plan.linked + 1] = child
      elseif base then
        plan.away[#plan.away + 1] = { child = child, parent = jk }
      end
    end
  end
  if #plan.away > 0 then requireTypes(k, OUTBOX_TYPES) end
  return plan
end

-- Carries out a plan: the job first (its deps go with it, so a child removed after it releases
-- nothing), then its subtree, or the unlinking of its children; then the outbox records owed to
-- children in other slots ('removeChild' / 'unlinkChild', relayed to glidemq_parentRemoved).
-- Returns true when it wrote an outbox record.
local function carryOut(p)
  if p.state == 'active' then releaseActive(p.k, p.id, p.jk) end
  local wrote = dropJob(p.k, p.id, p.jk)
  for _, c in ipairs(p.nodes) do
    -- (a node reached twice, by two records of one glidemq_parentRemoved, goes once)
    if c.state and redis.call('EXISTS', c.jk) == 1 then
      if c.state == 'active' then releaseActive(c.k, c.id, c.jk) end
      wrote = dropJob(c.k, c.id, c.jk) or wrote
    end
  end
  for _, child in ipairs(p.linked) do unlinkParent(child, p.jk) end
  if #p.away > 0 then
    local record = cjson.encode({ t = serverNow(), k = p.withChildren and 'removeChild' or 'unlinkChild' })
    for _, a in ipairs(p.away) do redis.call('HSET', p.k.flowOutbox, a.child .. ' ' .. a.parent, record) end
    wrote = true
  end
  return wrote
end

register('glidemq_removeJob', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_removeJob', args, REMOVE_JOB_ARGS)
  requireTypes(k, REMOVE_WRITES)
  local jk = jobKey(k, a.jobId)
  local state = readForRemoval(k, jk)
  if not state then return 0 end
  if state == 'active' and not a.force then
    return fail('ERR_JOB_ACTIVE', 'job ' .. a.jobId .. ' is being processed; wait for it to finish or remove it with force')
  end
  -- a parent goes with its unfinished subtree (BullMQ's removeChildren), refused whole when one
  -- of them is being processed (and force is '0')
  local plan, busy = planRemoval(k, a.jobId, jk, state, a.children, a.force)
  if not plan then
    return fail('ERR_JOB_ACTIVE', 'job ' .. a.jobId .. ': its child ' .. busy.jk .. ' is being processed; wait for it to finish ' ..
      'or remove the job with force')
  end
  carryOut(plan)
  return 1
end)

register('glidemq_parentRemoved', function(keys, args)
  local k = keysFor(keys[1])
  local _, records = decodeArgs('glidemq_parentRemoved', args, PARENT_REMOVED_HEAD, PARENT_REMOVED_EACH, 'count')
  requireTypes(k, REMOVE_WRITES)
  -- read phase: each child that still names its removed parent, and what its removal takes
  local todo = {}
  for _, r in ipairs(records) do
    local jk = jobKey(k, r.childId)
    requireKeyType(jk, 'hash')
    local named = false
    for _, p in ipairs(FLOW.words(redis.call('HGET', jk, 'parents'))) do
      if p == r.parentKey then named = true end
    end
    if named then
      local t = { jk = jk, parentKey = r.parentKey }
      if r.action == 'remove' then t.plan = planRemoval(k, r.childId, jk, readForRemoval(k, jk), true, true) end
      todo[#todo + 1] = t
    end
  end
  local changed, wrote = 0, false
  for _, t in ipairs(todo) do
    -- (a child an earlier record of this call removed with its subtree is gone)
    if unlinkParent(t.jk, t.parentKey) then
      changed = changed + 1
      -- unlinked first: the removed parent is owed no settlement
      if t.plan then wrote = carryOut(t.plan) or wrote end
    end
  end
  return { changed, wrote and 1 or 0 }
end)

-- Ids of stream entries no worker has been given yet (those after the group's last delivery).
local function undelivered(k, limit)
  if redis.call('EXISTS', k.stream) == 0 then return {} end
  local last = '0-0'
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', k.stream)) do
    for i = 1, #g, 2 do
      if g[i] == 'name' and g[i + 1] ~= GROUP then break end
      if g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
  end
  local ids = {}
  for _, e in ipairs(redis.call('XRANGE', k.stream, '(' .. last, '+', 'COUNT', limit)) do
    ids[#ids + 1] = e[2][2]
  end
  return ids
end

-- Up to `room` ids from the line of group `gid` that drain removes: waiting jobs and entries whose
-- job is gone; delayed ones (holding their place) only with `withDelayed`. Reads only.
local function groupLineIds(k, gid, room, withDelayed)
  local _, line = groupKeys(k, gid)
  local out, from = {}, 0
  while #out < room do
    local page = redis.call('ZRANGE', line, from, from + room - 1)
    if #page == 0 then break end
    for _, id in ipairs(page) do
      if #out >= room then break end
      if withDelayed or redis.call('HGET', jobKey(k, id), 'state') ~= 'delayed' then out[#out + 1] = id end
    end
    from = from + #page
  end
  return out
end

register('glidemq_drain', function(keys, args)
  local k = keysFor(keys[1])
  local a, groups = decodeArgs('glidemq_drain', args, DRAIN_ARGS, DRAIN_GROUP, 'groupCount')
  requireTypes(k, REMOVE_WRITES)
  if a.dryRun then
    local total = #undelivered(k, 1000000) + redis.call('LLEN', k.lifo) + redis.call('ZCARD', k.prioritized) +
      math.max(0, toInt(redis.call('HGET', k.meta, 'groupWaiting'), 0))
    if a.includeDelayed then total = total + redis.call('ZCARD', k.scheduled) end
    return { total, 0 }
  end
  local limit = a.limit
  -- candidates, each with the group line it came from (nil: a queue structure)
  local ids, lineOf = undelivered(k, limit), {}
  local function take(list, gid)
    for _, id in ipairs(list) do
      if #ids >= limit then return end
      ids[#ids + 1] = id
      if gid and lineOf[id] == nil then lineOf[id] = gid end
    end
  end
  take(redis.call('LRANGE', k.lifo, 0, limit - 1))
  take(redis.call('ZRANGE', k.prioritized, 0, limit - 1))
  if a.includeDelayed then take(redis.call('ZRANGE', k.scheduled, 0, limit - 1)) end
  for _, g in ipairs(groups) do
    if #ids >= limit then break end
    groupRequireTypes(k, g.groupId) -- its line and hash are written (a refusal names the key)
    take(groupLineIds(k, g.groupId, limit - #ids, a.includeDelayed), g.groupId)
  end
  -- read phase: each id once, its state and group
  local seen, plan = {}, {}
  for _, id in ipairs(ids) do
    if not seen[id] then
      seen[id] = true
      local jk = jobKey(k, id)
      plan[#plan + 1] = { id = id, jk = jk, state = readForRemoval(k, jk), gid = lineOf[id] }
    end
  end
  local removed = 0
  for _, p in ipairs(plan) do
    if p.state and p.state ~= 'active' then
      dropJob(k, p.id, p.jk, p.gid)
      removed = removed + 1
    elseif not p.state then
      -- an entry whose job is gone: dropped from the structure that listed it
      redis.call('LREM', k.lifo, 0, p.id)
      redis.call('ZREM', k.prioritized, p.id)
      redis.call('ZREM', k.scheduled, p.id)
      if p.gid then groupForget(k, p.id, p.jk, p.gid) end
    end
  end
  local more = (#ids >= limit) and 1 or 0
  return { removed, more }
end)

register('glidemq_clean', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_clean', args, CLEAN_ARGS)
  requireTypes(k, REMOVE_WRITES)
  local set = a.state == 'completed' and k.completed or k.failed
  local olderThan = serverNow() - a.graceMs
  local ids = redis.call('ZRANGEBYSCORE', set, '-inf', olderThan, 'LIMIT', a.offset, a.limit)
  if a.dryRun then return ids end
  for _, id in ipairs(ids) do readForRemoval(k, jobKey(k, id)) end
  for _, id in ipairs(ids) do dropJob(k, id, jobKey(k, id)) end
  if #ids > 0 then emit(k, 'cleaned', '', 'count', #ids) end
  return ids
end)

-- When the job at `jk` last changed hands: the first of `fields` it has (0 when it has none).
local function jobAge(jk, fields)
  for _, v in ipairs(redis.call('HMGET', jk, unpack(fields))) do
    if v then return tonumber(v) or 0 end
  end
  return 0
end

register('glidemq_cleanJobs', function(keys, args)
  local k = keysFor(keys[1])
  local a, jobs = decodeArgs('glidemq_cleanJobs', args, CLEAN_JOBS_ARGS, CLEAN_JOBS_EACH, 'jobCount')
  requireTypes(k, REMOVE_WRITES)
  if a.state == 'paused' and not isPaused(k) then return {} end
  local olderThan = serverNow() - a.graceMs
  local takes = CLEAN_JOB_STATES[a.state]
  -- read phase: every named job's hash (raises on a job key of another type) before any write
  local plan, seen = {}, {}
  for _, j in ipairs(jobs) do
    if #plan >= a.limit then break end
    if not seen[j.jobId] then
      seen[j.jobId] = true
      local jk = jobKey(k, j.jobId)
      local state = readForRemoval(k, jk)
      if state and takes[state] and jobAge(jk, CLEAN_AGE_FIELDS[state]) <= olderThan then
        plan[#plan + 1] = { id = j.jobId, jk = jk }
      end
    end
  end
  local ids = {}
  for i, p in ipairs(plan) do ids[i] = p.id end
  if a.dryRun then return ids end
  for _, p in ipairs(plan) do dropJob(k, p.id, p.jk) end
  if #ids > 0 then emit(k, 'cleaned', '', 'count', #ids) end
  return ids
end)
end
