--[[ flow-keys.lua — parents and children (no registered functions here): FLOW, the settling of a
  child's parents, shared by glidemq_finish / glidemq_finishMany (lua/finish.lua), stalled
  recovery (lua/reclaim.lua), removal (lua/remove.lua) and the flow functions (lua/flow.lua).
  Keys, each in its queue's own slot (src/engine/shared/keys.ts spells them too):
    <base>:waiting-children    zset: parents waiting for their children (score: the server's ms
                               when they began to wait).
    <base>:job:<id>:deps       set: the job keys of a parent's children not settled yet.
    <base>:job:<id>:processed  hash: child job key -> its return value (JSON text).
    <base>:job:<id>:failed     hash: child job key -> its failed reason (failParentOnFailure,
                               continueParentOnFailure).
    <base>:job:<id>:ignored    hash: child job key -> its failed reason (ignoreDependencyOnFailure).
    <base>:flow-outbox         hash: what this queue's children owe to parents in another queue:
                               field '<parentKey> <childKey>' (a key holds no whitespace), value
                               JSON {t: the server's ms it was written, k: kind, v: value}.
  A child's hash keeps `parents`: its parents' job keys joined by spaces (a DAG node may have
  several; a tree node one); a parent's keeps `flow` 'p' (FLOW.mark).
  Settling is idempotent: the SREM of the child's key from the parent's deps decides, so a record
  relayed twice, or a child that settles again, changes nothing. A parent leaves waiting-children
  exactly once (ZREM returned 1), when its deps are empty (or at once for continueParentOnFailure),
  and is then queued as an add would queue it (its delay, priority, LIFO, group).
  Kinds of a settlement: completed (value: the child's return value), fail (failParentOnFailure:
  the parent fails), ignore (ignoreDependencyOnFailure), remove (removeDependencyOnFailure, and a
  removed child or removeChildDependency), continue (continueParentOnFailure: the parent runs now).
  A parent in the child's queue is settled inline, in the same call; so is one in another queue on
  a standalone server (FLOW.reachesEveryQueue). On a cluster a parent in another queue (another
  slot) is settled through the outbox, which the worker relays (glidemq_settle on the parent's
  queue, then glidemq_outboxDone) right after the reply, and maintenance relays what a crash left.
]]
local FLOW = { RELAY_MARK = '{relay}' } -- the last element of a reply after which the worker relays
do
local MAX_DEPTH = 100 -- parents failed up a chain in one call (a flow is validated acyclic)
-- The keys of a parent's queue that settling it writes: always its waiting-children set; the
-- events while a QueueEvents may listen (PARENT_EVENTS); then, as releaseParent queues it, only
-- the place its options put it (a parent in the stream, the usual one, needs one key more, not
-- every list a requeue could touch).
local PARENT_QUEUE_TYPES = { 'waitingChildren', 'zset' }
local RELEASE_TYPES = {
  delayed = { 'scheduled', 'zset', 'wake', 'stream', 'events', 'stream' },
  prioritized = { 'prioritized', 'zset', 'meta', 'hash', 'wake', 'stream' },
  lifo = { 'lifo', 'list', 'wake', 'stream' },
  stream = { 'stream', 'stream' },
}
local OUTBOX_TYPES = { 'flowOutbox', 'hash' }
local META_TYPES, EVENT_TYPES = { 'meta', 'hash' }, { 'events', 'stream' }
-- The parent queue's meta field eventsUntil as checkParent read it (false: none), kept on its keys
-- for the call: a released parent's 'waiting' event is written only while a QueueEvents listens
-- (lua/events.lua), as a flow's 'added' and 'waiting-children' are.
local PARENT_EVENTS = {}

-- A flow job's hash keeps `flow` 'p' when it has children (dependency keys its removal deletes);
-- a job with parents keeps them in its `parents` field, which alone makes it a child. A finish
-- reads both fields with the job's other fields (a job outside flows lacks them). (A child stored
-- before this rule, or restored, may also say 'c' in `flow`: 'c' or 'pc', read as above.)
FLOW.mark = function(jk, role)
  local cur = redis.call('HGET', jk, 'flow') or ''
  if string.find(cur, role, 1, true) then return end
  redis.call('HSET', jk, 'flow', role == 'p' and ('p' .. cur) or (cur .. 'c'))
  PLAIN.lose(jk) -- (a job marked while claimed: its finish reads `flow` again, lua/activate.lua)
end
FLOW.hasChildren = function(role) return role ~= nil and role ~= false and string.find(role, 'p', 1, true) ~= nil end

-- The sub-keys of job key `jk`.
FLOW.depsOf = function(jk) return jk .. ':deps' end
FLOW.processedOf = function(jk) return jk .. ':processed' end
FLOW.failedOf = function(jk) return jk .. ':failed' end
FLOW.ignoredOf = function(jk) return jk .. ':ignored' end

-- A job key's queue base and job id, or nil for a text that is not one.
-- A job key is '<prefix>:{<queue>}:job:<id>', and neither a prefix nor a queue name holds a brace
-- (src/engine/shared/keys.ts), so the first '}:job:' ends the base: a plain find, where a pattern
-- costs ten times as much (this runs for every parent a child settles).
FLOW.splitJobKey = function(key)
  local at = string.find(key, '}:job:', 1, true)
  if not at or at + 6 > #key then return nil end
  return string.sub(key, 1, at), string.sub(key, at + 6)
end

-- The base and job id of job key `key`, refused unless it is one (`what` names it in the error).
FLOW.requireJobKey = function(key, what)
  local base, id = FLOW.splitJobKey(key)
  if not id or not ARG.jobId.check(id) then
    refuse('ERR_INVALID', what .. ' must be a job key (<prefix>:{<queue>}:job:<id>), got ' .. showArg(key))
  end
  return base, id
end

-- The words of `text` (keys joined by spaces) as a list.
FLOW.words = function(text)
  -- (a tree child has one parent: a plain find spares it the pattern)
  -- (and none, as a leaf's deps and a root's parents are: no pattern either)
  if not text or text == '' then return {} end
  local at = string.find(text, ' ', 1, true)
  if not at then return { text } end
  -- (split at spaces by plain finds: a pattern's character class costs several times as much
  -- per byte. A key holds no whitespace, so a tab or newline stays inside a word, which is then
  -- no job key and is refused as one)
  local out, from, n = {}, 1, 0
  while at do
    if at > from then
      n = n + 1
      out[n] = string.sub(text, from, at - 1)
    end
    from = at + 1
    at = string.find(text, ' ', from, true)
  end
  if from <= #text then out[n + 1] = string.sub(text, from) end
  return out
end

-- The kind a child's failure for good settles its parents with, from its stored options (JSON),
-- or nil (BullMQ's default: the parent keeps waiting, the child stays unsettled).
FLOW.failureKind = function(opts)
  if not opts or not string.find(opts, 'OnFailure', 1, true) then return nil end
  local ok, o = pcall(cjson.decode, opts)
  if not ok or type(o) ~= 'table' then return nil end
  if o.failParentOnFailure == true then return 'fail' end
  if o.ignoreDependencyOnFailure == true then return 'ignore' end
  if o.removeDependencyOnFailure == true then return 'remove' end
  if o.continueParentOnFailure == true then return 'continue' end
  return nil
end

-- Whether one call may write every queue's keys: true on a standalone server (and a Sentinel's
-- primary), where a parent in another queue is settled inline, in the child's own call, so there
-- is no window between a child's finish and its parent's settlement; false on a cluster, whose
-- node holds only its own slots (there the outbox carries the settlement). CLUSTER KEYSLOT
-- answers only on a cluster; the answer cannot change while the server runs, so it is kept.
local reachesEveryQueue = nil
FLOW.reachesEveryQueue = function()
  if reachesEveryQueue == nil then reachesEveryQueue = not pcall(redis.call, 'CLUSTER', 'KEYSLOT', 'glidemq') end
  return reachesEveryQueue
end

-- The table kept in `t`'s field `name` for the rest of the call (made empty the first time;
-- rawget/rawset: a keys table answers unknown fields with key names).
FLOW.kept = function(t, name)
  local v = rawget(t, name)
  if not v then
    v = {}
    rawset(t, name, v)
  end
  return v
end

-- The queue keys of base `base`: `k` itself when it is that queue (its checked types are kept).
-- Another queue's table is made once per call and kept on `k` (rawset: `k` makes key names of
-- other fields), so its checked types are kept too across the children of one call.
local function queueOf(k, base)
  if base == k.base then return k end
  local known = FLOW.kept(k, '__flowQueues')
  local q = known[base]
  if not q then
    q = keysFor(base .. ':meta')
    known[base] = q
  end
  return q
end

-- The parents of `parents` (a child's `parents` field), each { key = its job key, base, id, deps =
-- its deps key, q = its queue's keys (queueOf), inline = whether this call settles it itself (its
-- queue is `k`'s, or every queue is reachable) }, split once per call and kept on `k` by the
-- field's text: a batch's children of one parent share it, and each child pays one lookup.
local PARENTS_KEPT = {} -- (a table as the field name: no key name can be it)
local function parentsOf(k, parents)
  local known = rawget(k, PARENTS_KEPT)
  local list = known and known[parents]
  if list then return list end
  if not known then
    known = {}
    rawset(k, PARENTS_KEPT, known)
  end
  list = {}
  for _, key in ipairs(FLOW.words(parents)) do
    local base, id = FLOW.splitJobKey(key)
    local inline = base == k.base or (base ~= nil and FLOW.reachesEveryQueue())
    list[#list + 1] = { key = key, base = base, id = id, deps = FLOW.depsOf(key), q = inline and queueOf(k, base) or false,
      inline = inline }
  end
  known[parents] = list
  return list
end

-- Whether a parent in `parents` (a child's `parents` field) is in queue `k` itself: only then may
-- its release by a completion put a job in k's priority or LIFO list (lua/finish.lua planFinish).
FLOW.parentHere = function(k, parents)
  local list = parentsOf(k, parents)
  for i = 1, #list do
    local p = list[i]
    if p.base == k.base then return true end
  end
  return false
end

local checkParents

-- The hash a settlement of each kind records the child in ('remove' records it nowhere).
local SETTLED_IN = { completed = FLOW.processedOf, ignore = FLOW.ignoredOf, fail = FLOW.failedOf, continue = FLOW.failedOf }

-- The fields of each parent hash checkParent read in this call (job key -> the HMGET's answer:
-- grp, parents, opts, delay, priority, lifo), kept on the parent queue's keys `pk`: the release
-- of a parent whose last child settles in the same call places it by them (releaseParent)
-- instead of reading them again. A settlement reads them only in a call that checked the parent
-- first, and nothing a settlement writes changes them.
local FIELDS_KEPT = {}
local function fieldsOf(pk) return rawget(pk, FIELDS_KEPT) end

-- Checks (reads only) the keys settling parent `id` of queue `pk` with `kind` writes: the parent's
-- hash and sub-keys, the queue keys a release or a failure writes, and for a failure, on up the
-- parent's own parents.
local function checkParent(pk, id, kind, depth, jk)
  jk = jk or jobKey(pk, id)
  -- a call's children of one parent (a finish batch) check it once per kind; it is marked only
  -- once every check passed, so a batch planned again isolated (lua/finish.lua) checks it again
  local ofKind = FLOW.kept(FLOW.kept(pk, '__flowChecked'), kind)
  if ofKind[jk] then return end
  -- the parent's hash is read here anyway: its read answers its type too (a wrong type is the
  -- only error HMGET gives), so a child's settlement costs no TYPE call for it
  local f = redis.pcall('HMGET', jk, 'grp', 'parents', 'opts', 'delay', 'priority', 'lifo')
  if f.err then requireKeyType(jk, 'hash') end
  requireKeyType(FLOW.depsOf(jk), 'set')
  -- of the result hashes, the one this kind writes (FLOW.settleOne)
  local results = SETTLED_IN[kind]
  if results then requireKeyType(results(jk), 'hash') end
  requireTypes(pk, PARENT_QUEUE_TYPES)
  if rawget(pk, PARENT_EVENTS) == nil then
    -- (the read answers meta's type; an events stream is checked only where one may be written)
    local untilMs = redis.pcall('HGET', pk.meta, 'eventsUntil')
    if type(untilMs) == 'table' then requireTypes(pk, META_TYPES) end
    if untilMs then requireTypes(pk, EVENT_TYPES) end
    rawset(pk, PARENT_EVENTS, untilMs)
  end
  -- the keys its release writes (releaseParent: its delay, else requeue: its group, priority, LIFO)
  if toInt(f[4], 0) > 0 then
    requireTypes(pk, RELEASE_TYPES.delayed)
    if f[1] then groupRequireTypes(pk, f[1]) end
  elseif f[1] then
    requireRequeueTypes(pk, f[1])
  elseif toInt(f[5], 0) > 0 then
    requireTypes(pk, RELEASE_TYPES.prioritized)
  elseif f[6] == '1' then
    requireTypes(pk, RELEASE_TYPES.lifo)
  else
    requireTypes(pk, RELEASE_TYPES.stream)
  end
  if kind == 'fail' then
    requireTypes(pk, FAILURE_TYPES.kept)
    FAILURE_TYPES.dead.target(pk) -- the parent's dead-letter queue (lua/dead-letters.lua)
    local up = FLOW.failureKind(f[3])
    if f[2] and up and depth < MAX_DEPTH then checkParents(pk, f[2], up, depth + 1) end
  end
  ofKind[jk] = true
  local kept = fieldsOf(pk)
  if not kept then
    kept = {}
    rawset(pk, FIELDS_KEPT, kept)
  end
  kept[jk] = f
end

-- Checks (reads only) the keys settling the parents `parents` (the child's `parents` field) of a
-- child of queue `k` with `kind` writes: inline parents' keys, or the outbox.
checkParents = function(k, parents, kind, depth)
  local list = parentsOf(k, parents)
  for i = 1, #list do
    local p = list[i]
    if p.inline then
      checkParent(p.q, p.id, kind, depth or 0, p.key)
    else
      requireTypes(k, OUTBOX_TYPES)
    end
  end
end
FLOW.checkParents = checkParents
FLOW.checkParent = checkParent

-- A finish's check of a child with `parents` (its field) that settles them with `kind`: checks the
-- keys (checkParents) once per call for each kind and parents text, so the children of one parent
-- in a batch each pay one lookup. Returns whether the settlement may put a job in `k`'s priority or
-- LIFO list: a completion releases only its own parents, so only one in `k` counts; a failure
-- may go on up (any queue).
local PLANNED = {}
FLOW.planChild = function(k, parents, kind)
  local planned = rawget(k, PLANNED)
  if not planned then
    planned = {}
    rawset(k, PLANNED, planned)
  end
  local ofKind = planned[kind]
  if not ofKind then
    ofKind = {}
    planned[kind] = ofKind
  end
  local lists = ofKind[parents]
  if lists == nil then
    checkParents(k, parents, kind)
    lists = kind ~= 'completed' or FLOW.parentHere(k, parents)
    ofKind[parents] = lists
  end
  return lists
end

-- Queues parent `id` (hash `jk`) of queue `pk` that no longer waits for children, as an add would:
-- after its delay (from the server's now), else where its priority, LIFO or group puts it. `f`
-- (optional): its fields as checkParent read them in this call (fieldsOf), else they are read.
local function releaseParent(pk, id, jk, now, f)
  local delay
  if f then delay = toInt(f[4], 0) else delay = toInt(redis.call('HGET', jk, 'delay'), 0) end
  if delay > 0 then
    redis.call('HSET', jk, 'state', 'delayed')
    scheduleDue(pk, id, now + delay, now)
    groupHoldDelayed(pk, id, jk)
    emit(pk, 'delayed', id, 'delay', delay)
  else
    if not f then
      requeue(pk, id, jk)
    elseif f[1] then
      groupEnqueue(pk, id, jk, f[1])
    else
      enqueueReady(pk, id, jk, toInt(f[5], 0), f[6] == '1')
    end
    -- (a release its check did not read for: always, as before the QueueEvents rule)
    local untilMs = rawget(pk, PARENT_EVENTS)
    if untilMs == nil or listening(pk, now, { false, false, untilMs }) then emit(pk, 'waiting', id, 'prev', 'waiting-children') end
  end
end
FLOW.releaseParent = releaseParent -- (lua/flow.lua glidemq_releaseParents: a parent left waiting with no dependency)

local settleParents

-- Fails parent `id` of queue `pk`, which waited for children, because child `childKey` failed
-- (failParentOnFailure), as a failure for good is stored (its removeOnFail), then settles its own
-- parents as its own options say. Returns true when it wrote an outbox record.
local function failParent(pk, id, jk, childKey, now, depth)
  local f = redis.call('HMGET', jk, 'parents', 'opts', 'attemptsMade')
  local reason = 'child ' .. childKey .. ' failed'
  storeFailure(pk, jk, id, keepRuleFor(f[2], ''), now, toInt(f[3], 0), reason, false)
  local up = FLOW.failureKind(f[2])
  if f[1] and up and depth < MAX_DEPTH then
    return settleParents(pk, jk, f[1], up, reason, now, depth + 1)
  end
  return false
end

-- Records in `batch` (FLOW.flushSettled) the completion of child `childKey` that the SREM of its
-- key from the deps of parent `id` (hash `jk`) of queue `pk` just decided (once only): its value,
-- and the look at what is left, wait for the batch's end.
local function batchCompletion(batch, pk, id, jk, childKey, value)
  local e = batch[jk]
  if not e then
    e = { pk = pk, id = id, jk = jk, fields = {} }
    batch[jk] = e
    batch[#batch + 1] = e
  end
  local fields = e.fields
  fields[#fields + 1], fields[#fields + 2] = childKey, value
end

--[[ Settles child `childKey` into parent `id` of queue `pk` with `kind` and `value` (see the
  header). Idempotent: only the call that takes the child out of the parent's deps changes
  anything. Returns whether it changed anything, and whether it wrote an outbox record (a parent
  failed in turn, whose own parent is in another queue). ]]
FLOW.settleOne = function(pk, id, childKey, kind, value, now, depth, batch, jk)
  jk = jk or jobKey(pk, id)
  if redis.call('SREM', FLOW.depsOf(jk), childKey) == 0 then return false, false end
  if batch and kind == 'completed' then
    batchCompletion(batch, pk, id, jk, childKey, value)
    return true, false
  end
  if kind == 'completed' then
    redis.call('HSET', FLOW.processedOf(jk), childKey, value)
  elseif kind == 'ignore' then
    redis.call('HSET', FLOW.ignoredOf(jk), childKey, value)
  elseif kind == 'fail' or kind == 'continue' then
    redis.call('HSET', FLOW.failedOf(jk), childKey, value)
  end
  local wrote = false
  if kind == 'fail' then
    if redis.call('ZREM', pk.waitingChildren, id) == 1 then
      wrote = failParent(pk, id, jk, childKey, now, depth or 0)
    elseif redis.call('EXISTS', jk) == 1 then
      -- a parent not waiting (running, or not started): it fails when it next waits for its
      -- children (glidemq_moveToWaitingChildren), as BullMQ marks it lazily
      redis.call('HSET', jk, 'failedBy', childKey)
    end
  elseif kind == 'continue' or redis.call('SCARD', FLOW.depsOf(jk)) == 0 then
    if redis.call('ZREM', pk.waitingChildren, id) == 1 then releaseParent(pk, id, jk, now, (fieldsOf(pk) or {})[jk]) end
  end
  return true, wrote
end

-- Ends batch `batch` (FLOW.newBatch) of completions settled at the server's `now`: each parent's
-- children's values in one HSET, then one look at its deps, and its release when they are empty.
local FIELDS_AT_ONCE = 1000 -- (unpack's limit is a few thousand values)
FLOW.flushSettled = function(batch, now)
  for i = 1, #batch do -- (#batch read once: the loop empties it)
    local e = batch[i]
    local jk, fields = e.jk, e.fields
    for b = 0, #fields - 1, FIELDS_AT_ONCE do
      redis.call('HSET', FLOW.processedOf(jk), unpack(fields, b + 1, math.min(b + FIELDS_AT_ONCE, #fields)))
    end
    if redis.call('SCARD', FLOW.depsOf(jk)) == 0 and redis.call('ZREM', e.pk.waitingChildren, e.id) == 1 then
      releaseParent(e.pk, e.id, jk, now, (fieldsOf(e.pk) or {})[jk])
    end
    batch[jk], batch[i] = nil, nil
  end
end

--[[ Settles every parent in `parents` (a child's `parents` field) of child `childJk` of queue `k`
  with `kind` and `value`: a parent in the same queue inline, one in another queue by an outbox
  record. The caller checked the keys (FLOW.checkParents). With `batch` (a table, a finishMany's),
  a completion's value and the release of a parent it empties are written by
  FLOW.flushSettled(batch), which the caller runs after its last settlement and before it reads
  anything they write: the children of one parent in a batch then cost one HSET and one SCARD
  together. Any other kind ends the batch first, so every write keeps its order. Returns true
  when it wrote an outbox record (the caller's reply tells the worker to relay it). ]]
settleParents = function(k, childJk, parents, kind, value, now, depth, batch)
  local wrote = false
  if batch and kind ~= 'completed' and batch[1] then FLOW.flushSettled(batch, now) end
  local list = parentsOf(k, parents)
  for i = 1, #list do
    local p = list[i]
    if p.inline then
      if batch and kind == 'completed' then
        -- (FLOW.settleOne's batched completion, without its calls: this runs for every child)
        if redis.call('SREM', p.deps, childJk) == 1 then batchCompletion(batch, p.q, p.id, p.key, childJk, value) end
      else
        local _, cascaded = FLOW.settleOne(p.q, p.id, childJk, kind, value, now, depth or 0, batch, p.key)
        wrote = wrote or cascaded
      end
    elseif p.base then
      redis.call('HSET', k.flowOutbox, p.key .. ' ' .. childJk, cjson.encode({ t = now, k = kind, v = value }))
      wrote = true
    end
  end
  return wrote
end
FLOW.settleParents = settleParents
FLOW.queueOf = queueOf

--[[ Outboxes (the flow outbox here, the dead-letter outbox of lua/dead-letters.lua): hashes of
  records another slot is owed, field -> JSON with `t`, the server's ms it was written. ]]
-- Deletes each record of `records` whose value is still the one relayed (a record written again
-- since stays); `fieldName`, `valueName` name the record's parts. Returns how many went.
FLOW.outboxDone = function(hashKey, records, fieldName, valueName)
  local done = 0
  for _, r in ipairs(records) do
    local field = r[fieldName]
    if redis.call('HGET', hashKey, field) == r[valueName] then done = done + redis.call('HDEL', hashKey, field) end
  end
  return done
end

-- At most `count` records of `hashKey` written at least `minAgeMs` before the server's now, as a
-- flat list field1, value1, field2, value2, ...
FLOW.outboxList = function(hashKey, minAgeMs, count)
  local out = {}
  if redis.call('EXISTS', hashKey) == 0 then return out end
  local oldest = serverNow() - minAgeMs
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', hashKey, cursor, 'COUNT', 100)
    cursor = page[1]
    local kv = page[2]
    for i = 1, #kv, 2 do
      local t = 0 -- with no minimum age every record qualifies: no need to read its time
      if minAgeMs > 0 then
        local ok, r = pcall(cjson.decode, kv[i + 1])
        t = ok and type(r) == 'table' and tonumber(r.t) or 0
      end
      if t <= oldest and #out < 2 * count then
        out[#out + 1], out[#out + 2] = kv[i], kv[i + 1]
      end
    end
  until cursor == '0' or #out >= 2 * count
  return out
end
end
