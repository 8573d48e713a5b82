--[[ flow.lua — parents and children (BullMQ's flows, glide-mq's DAGs): adding a flow, settling a
  child into its parent, the outbox of settlements owed to another queue, a running parent that
  waits for children, and removing a child's dependency. The keys and the settling are described
  in lua/flow-keys.lua. A flow is one list of nodes, trees and DAGs alike: a node has the job keys
  of its parents and of its children (deps); a node with deps is a parent.

  glidemq_addFlow — stores a flow (or the part of it in the queues of KEYS) whole or not at all.
  KEYS[1..n]  the meta keys of the queues the flow's nodes are in, and of the queue of every
           existing job a node names as its parent; KEYS[1] is the queue whose producer numbers
           the call (the flow's top node's).
  ARGV[1]  maxPayload: largest accepted data, in bytes (0 = no limit).
  ARGV[2]  producer: '' or the client's producer id (as glidemq_add's: a call already run is
           answered as the first time and writes nothing, lua/producers.lua).
  ARGV[3]  seq: the call's number for this producer (0 without a producer).
  ARGV[4]  answeredBelow: as glidemq_add's.
  ARGV[5]  count: how many nodes follow (0..10000), each a group of 12 arguments:
    group.queue: the node's queue, a position in KEYS (1..n).
    group.jobId: the node's job id (1..256 bytes, no ':', '{', '}', whitespace or control
           characters, not a whole number: the client makes one when the user gives none).
    group.name: the job's name (1..1024 bytes).
    group.data: the job's data (JSON text, at most maxPayload bytes).
    group.delay: ms it waits before it may run (a parent: once its children settled), from the
           server's clock.
    group.priority: 0 = none, else 1..2097152.
    group.lifo: '1' last in, first out; '0' not.
    group.attempts: attempts before it fails for good (>= 1).
    group.opts: '' or a JSON object of the options only clients read and the failure policy of a
           child (failParentOnFailure, ignoreDependencyOnFailure, removeDependencyOnFailure,
           continueParentOnFailure), lua/jobs.lua JOB_OPTS.
    group.groupSpec: '' or the job's group as a JSON object (as glidemq_add's).
    group.parents: '' or the job keys of its parents joined by spaces: nodes of this call, or
           existing jobs that have not finished (each of a queue in KEYS).
    group.deps: '' or the job keys of its children joined by spaces, each a node of this call
           that names it among its parents. A node with deps is stored waiting for them
           (state 'waiting-children'); one without is queued as glidemq_add queues a job.
  Returns  {ts, created}: ts the server time (ms) stored as every job's ts; created 1 when the
           flow was stored, 0 when every node's job existed already (a resend: nothing written).
           A repeated call (same producer and seq) gets the first run's reply.
  Errors   ERR_INVALID (an argument, named with its node; a link one side does not name; a cycle;
           a node whose job exists while others do not), ERR_TOO_LARGE (data over maxPayload),
           ERR_JOB_NOT_FOUND (a parent outside the call that does not exist), ERR_JOB_STATE (a
           parent outside the call that finished), ERR_WRONG_TYPE (a key it writes holds another
           type). All checked before the first write: a refused flow writes nothing.

  glidemq_addFlowPart — stores one part of a flow whose queues span several hash slots (a Valkey
  Cluster, lua/flow-parts.lua): the nodes of one slot, as glidemq_addFlow stores them, except that
  a link to a node outside the part is taken as the journal's promise (the part in that node's
  slot stores it, parents' parts before their children's). The first part also stores the journal
  (the remaining parts' full arguments) in the queue of KEYS[1], and registers the flow's children
  of existing parents (links) in those parents' deps. A part whose nodes exist already answers as
  stored and writes nothing; a first part whose journal exists likewise.
  KEYS[1..n]  the meta keys of the part's queues (one slot) and of the queues of the parents named in
           links; KEYS[1] holds the journal and numbers the call.
  ARGV[1]  maxPayload: as glidemq_addFlow's.
  ARGV[2]  producer: as glidemq_addFlow's ('' for a part after the first).
  ARGV[3]  seq: as glidemq_addFlow's.
  ARGV[4]  answeredBelow: as glidemq_addFlow's.
  ARGV[5]  flowId: the flow's id, one job key: its first node's (the journal's field).
  ARGV[6]  journal: '' (a part after the first) or the journal, a JSON object {parts: [{keys, args}]}.
  ARGV[7]  links: '' or pairs of job keys joined by spaces, '<parentKey> <childKey> ...': an existing
           parent (not finished) of a queue in KEYS and a child of the flow, registered in the
           parent's deps (unless the child settled there already).
  ARGV[8]  count: how many nodes follow, each a group of 12 arguments as glidemq_addFlow's:
    group.queue: the node's queue, a position in KEYS.
    group.jobId: the node's job id.
    group.name: the job's name.
    group.data: the job's data.
    group.delay: ms it waits before it may run.
    group.priority: 0 = none, else 1..2097152.
    group.lifo: '1' or '0'.
    group.attempts: attempts before it fails for good.
    group.opts: '' or a JSON object of options.
    group.groupSpec: '' or the job's group.
    group.parents: '' or its parents' job keys (any slot).
    group.deps: '' or its children's job keys (any slot).
  Returns  {ts, created}: as glidemq_addFlow's (created 0: the part, or the first part's journal,
           was stored before).
  Errors   as glidemq_addFlow's.

  glidemq_settle — settles children into their parents of one queue (the relay of outbox records).
  KEYS[1]  meta key of the parents' queue.
  ARGV[1]  count: how many settlements follow (1..10000), each a group of 4 arguments:
    group.parentId: the parent's job id.
    group.childKey: the child's job key.
    group.kind: completed | fail | ignore | remove | continue (lua/flow-keys.lua).
    group.value: the child's return value (completed) or failed reason.
  Every settlement is checked before the first write; then each is made in argument order.
  Returns  {changed, relay}: changed the number of children that were still among their parent's
           deps (the others settled before: nothing written for them); relay 1 when a parent
           failed in turn wrote an outbox record.
  Errors   ERR_INVALID (an argument, named with its group), ERR_WRONG_TYPE (a key it writes holds
           another type).

  glidemq_outboxDone — forgets outbox records once they were relayed.
  KEYS[1]  meta key of the children's queue.
  ARGV[1]  count: how many records follow (1..10000), each a group of 2 arguments:
    group.field: the record's field ('<parentKey> <childKey>').
    group.value: the record's value as it was relayed (a record written again since stays).
  Returns  the number of records deleted.
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (the outbox holds another type).

  glidemq_outboxList — outbox records to relay. Read-only.
  KEYS[1]  meta key.
  ARGV[1]  minAgeMs: only records written at least this many ms before the server's now.
  ARGV[2]  count: records at most (1..10000).
  Returns  a flat list: field1, value1, field2, value2, ...
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (the outbox holds another type).

  glidemq_moveToWaitingChildren — a running parent gives up its claim and waits for its children.
  KEYS[1]  meta key.
  ARGV[1]  jobId: the running job.
  ARGV[2]  fence: the fence of its claim.
  ARGV[3]  consumer: the worker's consumer name.
  ARGV[4]  childKey: '' or one child's job key (BullMQ's opts.child): it waits only while that
           child is among its unsettled children (and then for all of them, as BullMQ's).
  Returns  'waiting' (it has children not settled: it waits for them, state 'waiting-children') |
           'none' (every child settled, or the child named did: it keeps its claim and runs on) |
           'failed:<childKey>' (a child with failParentOnFailure failed while it was not waiting: it keeps its claim, and
           its processor fails it) | 'stale' (the caller no longer owns the claim: nothing was
           changed).
  Errors   ERR_JOB_NOT_FOUND (the job was removed), ERR_INVALID (an argument), ERR_WRONG_TYPE.

  glidemq_releaseParents — queues the parents left in waiting-children with no dependency (a
  settlement lost: the call that empties a parent's dependencies queues it, so none should stay).
  Run by `glidemq heal` and a worker's upkeep (src/engine/administering/flow-repair.ts).
  KEYS[1]  meta key.
  ARGV[1]  check: '1' only counts them, '0' queues them (as an add would: delay, priority, group).
  ARGV[2]  minAgeMs: only parents waiting at least this many ms by the server's clock.
  ARGV[3]  start: the rank in waiting-children (oldest first) to look from.
  ARGV[4]  count: parents looked at (1..10000).
  Returns  {found, next}: found the parents with no dependency (queued unless check); next the
           rank to look from next time (0: the look reached the end).
  Errors   ERR_INVALID (an argument), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_removeChildDependency — a child stops being one of its parents' dependencies.
  KEYS[1]  meta key of the child's queue.
  ARGV[1]  jobId: the child.
  Returns  {removed, relay}: removed 1 when it had parents (each settles it as removed: a parent
           whose last dependency it was is queued), 0 when it had none; relay 1 when an outbox
           record was written (a parent in another queue).
  Errors   ERR_JOB_NOT_FOUND (no such job), ERR_INVALID, ERR_WRONG_TYPE.
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
-- Job keys joined by spaces ('' for none), each <base>:job:<id> with a job id as ARG.jobId takes.
local JOB_KEYS = kind("'' or job keys (<prefix>:{<queue>}:job:<id>) joined by spaces", function(v)
  for w in string.gmatch(v, '%S+') do
    local _, id = FLOW.splitJobKey(w)
    if not id or not ARG.jobId.check(id) then return nil end
  end
  return v
end)
-- A node's links (its parents, its deps): job keys joined by spaces, or ''. Read as text only: a
-- link to a node of the call is checked by being that node's key (checkLinks), and any other link
-- (an existing parent, a part's promise) by FLOW.requireJobKey, so a flow's many links between its
-- own nodes cost no parsing.
local NODE_LINKS = kind("'' or job keys (<prefix>:{<queue>}:job:<id>) joined by spaces", function(v) return v end)
local FLOW_HEAD = { 'maxPayload', ARG.int(0, MAX_SAFE_INT), 'producer', ARG.producer,
  'seq', ARG.callSeq, 'answeredBelow', ARG.callSeq, 'count', ARG.count }
local FLOW_NODE = {
  'queue', ARG.int(1, MAX_COUNT),
  'jobId', kind("a job id (1 to 256 bytes, no ':', '{', '}', whitespace or control characters) that is not a whole number", function(v)
    if string.find(v, '^%-?%d+$') then return nil end
    return ARG.jobId.check(v)
  end),
  'name', ARG.jobName,
  'data', ARG.any,
  'delay', ARG.ms,
  'priority', ARG.int(0, MAX_PRIORITY),
  'lifo', ARG.flag,
  'attempts', ARG.int(1, MAX_SAFE_INT),
  'opts', JOB_OPTS,
  'groupSpec', ARG.any,
  'parents', NODE_LINKS,
  'deps', NODE_LINKS,
}
-- A node's group decoded in one step (args.lua readGroup): each argument checked by its kind in
-- FLOW_NODE (by position: the kinds are the schema's even entries), the table built whole with
-- the fields checkNodes and checkLinks add (k, jk, group, parentList, depList, left); nil on a
-- bad argument, which readGroup's loop then names.
FLOW_NODE.read = function(args, at)
  local s = FLOW_NODE
  local queue, jobId, name = s[2].check(args[at]), s[4].check(args[at + 1]), s[6].check(args[at + 2])
  local delay, priority, lifo = s[10].check(args[at + 4]), s[12].check(args[at + 5]), s[14].check(args[at + 6])
  local attempts, opts = s[16].check(args[at + 7]), s[18].check(args[at + 8])
  local data, groupSpec, parents, deps = args[at + 3], args[at + 9], args[at + 10], args[at + 11]
  if not (queue and jobId and name and data and delay and priority and lifo ~= nil and attempts and opts
    and groupSpec and parents and deps) then return nil end
  return { queue = queue, jobId = jobId, name = name, data = data, delay = delay, priority = priority, lifo = lifo,
    attempts = attempts, opts = opts, groupSpec = groupSpec, parents = parents, deps = deps,
    k = false, jk = false, group = false, parentList = false, depList = false, left = false }
end
local COUNT_HEAD = { 'count', ARG.int(1, MAX_COUNT) }
local SETTLE_EACH = { 'parentId', ARG.jobId, 'childKey', JOB_KEYS,
  'kind', ARG.oneOf('completed', 'fail', 'ignore', 'remove', 'continue'), 'value', ARG.any }
local OUTBOX_DONE_EACH = { 'field', ARG.any, 'value', ARG.any }
local OUTBOX_LIST_ARGS = { 'minAgeMs', ARG.ms, 'count', ARG.int(1, MAX_COUNT) }
local WAIT_CHILDREN_ARGS = { 'jobId', ARG.jobId, 'fence', ARG.fence, 'consumer', ARG.nonEmpty, 'childKey', JOB_KEYS }
local REMOVE_DEP_ARGS = { 'jobId', ARG.jobId }
local RELEASE_PARENTS_ARGS = { 'check', ARG.flag, 'minAgeMs', ARG.ms, 'start', ARG.int(0, MAX_SAFE_INT), 'count', ARG.int(1, MAX_COUNT) }
local FLOW_QUEUE_TYPES = { 'waitingChildren', 'zset' }
local OUTBOX_TYPES = { 'flowOutbox', 'hash' }
local WAIT_TYPES = { 'waitingChildren', 'zset', 'events', 'stream' }

-- Names node i of a call in an error; built only when there is an error to report.
local function nodeLabel(n, i)
  return 'glidemq_addFlow: node #' .. i .. ' (job ' .. n.jobId .. ')'
end

-- (A parent with many children is asked once by each: a scan of its list each time grew with the
-- square of their number.)
-- Whether `list` (n's links) holds `v`: a tree node's one parent is compared, a longer list is
-- made a set once (kept on `n` under `name`).
local function linked(n, name, list, v)
  if #list == 1 then return list[1] == v end
  local s = n[name]
  if not s then
    s = {}
    for i = 1, #list do s[list[i]] = true end
    n[name] = s
  end
  return s[v] == true
end

-- The queues of KEYS, each a meta key: their key tables by position, and by base.
local function flowQueues(keys)
  if #keys < 1 then refuse('ERR_INVALID', 'glidemq_addFlow: KEYS must name at least one queue meta key') end
  local queues, bases = {}, {}
  for i = 1, #keys do
    local key = keys[i]
    if string.sub(key, -5) ~= ':meta' then
      refuse('ERR_INVALID', 'glidemq_addFlow: KEYS[' .. i .. '] must be a queue meta key (<prefix>:{<queue>}:meta), got ' .. showArg(key))
    end
    queues[i] = keysFor(key)
    bases[queues[i].base] = queues[i]
  end
  return queues, bases
end

-- Checks each node by itself (payload, options, group) and indexes the call by job key.
local function checkNodes(a, nodes, queues)
  local byKey = {}
  for i = 1, #nodes do
    local n = nodes[i]
    if n.queue > #queues then
      refuse('ERR_INVALID', nodeLabel(n, i) .. ': queue is ' .. n.queue .. ', but KEYS name ' .. #queues .. ' queues')
    end
    n.k = queues[n.queue]
    n.jk = n.k.jobPrefix .. n.jobId
    if byKey[n.jk] then refuse('ERR_INVALID', nodeLabel(n, i) .. ': the call names job ' .. n.jk .. ' twice') end
    byKey[n.jk] = n
    if a.maxPayload > 0 and #n.data > a.maxPayload then
      refuse('ERR_TOO_LARGE', nodeLabel(n, i) .. ': data is ' .. #n.data .. ' bytes, over the limit of ' ..
        a.maxPayload .. ' bytes (maxPayload); store large data elsewhere and enqueue a reference')
    end
    if n.priority > 0 and n.lifo then
      refuse('ERR_INVALID', nodeLabel(n, i) .. ': a job cannot be both prioritized and LIFO (send priority 0 or lifo 0)')
    end
    if n.groupSpec ~= '' then
      local g, why = groupParse(n.groupSpec)
      if not g then refuse('ERR_INVALID', nodeLabel(n, i) .. ': groupSpec: ' .. why) end
      if n.priority > 0 or n.lifo then
        refuse('ERR_INVALID', nodeLabel(n, i) .. ": a group job runs in its group's order: it cannot be prioritized or LIFO")
      end
      n.group = g
    end
    n.parentList, n.depList = FLOW.words(n.parents), FLOW.words(n.deps)
  end
  return byKey
end

-- Checks that every link is named by both of its ends (a parent outside the call: by the child
-- alone, and its queue among KEYS), and that the nodes hold no cycle. Returns the parents outside
-- the call: job key -> { k, id, children }.
local function checkLinks(nodes, byKey, bases)
  local outside = {}
  for i = 1, #nodes do
    local n = nodes[i]
    local depList, parentList = n.depList, n.parentList
    for j = 1, #depList do
      local d = depList[j]
      local c = byKey[d]
      if not c or not linked(c, 'parentSet', c.parentList, n.jk) then
        refuse('ERR_INVALID', nodeLabel(n, i) .. ': dependency ' .. d .. ' is not a node of the call that names it as its parent')
      end
    end
    for j = 1, #parentList do
      local p = parentList[j]
      local pn = byKey[p]
      if pn then
        if not linked(pn, 'depSet', pn.depList, n.jk) then
          refuse('ERR_INVALID', nodeLabel(n, i) .. ': parent ' .. p .. ' does not list it among its dependencies')
        end
      else
        local base, id = FLOW.requireJobKey(p, nodeLabel(n, i) .. ': parent')
        if not bases[base] then
          refuse('ERR_INVALID', nodeLabel(n, i) .. ': the queue of parent ' .. p .. ' is not among KEYS')
        end
        local o = outside[p] or { k = bases[base], id = id, children = {} }
        o.children[#o.children + 1] = n.jk
        outside[p] = o
      end
    end
  end
  -- no cycle: every node is reached by taking away those whose deps are all taken away (Kahn)
  -- (a node's count of deps left is kept on the node, and the ready nodes are a stack popped by
  -- hand: no table keyed by job key, no table.remove call per node)
  local ready, top, done = {}, 0, 0
  for i = 1, #nodes do
    local n = nodes[i]
    n.left = #n.depList
    if n.left == 0 then
      top = top + 1
      ready[top] = n
    end
  end
  while top > 0 do
    local n = ready[top]
    ready[top], top = nil, top - 1
    done = done + 1
    local parentList = n.parentList
    for j = 1, #parentList do
      local pn = byKey[parentList[j]]
      if pn then
        pn.left = pn.left - 1
        if pn.left == 0 then
          top = top + 1
          ready[top] = pn
        end
      end
    end
  end
  if done < #nodes then refuse('ERR_INVALID', 'glidemq_addFlow: the nodes hold a cycle (a job depends on itself through its children)') end
  return outside
end

-- Whether the call's jobs exist already: true when all do (a resend), false when none; a refusal
-- when some do. One EXISTS per EXISTS_AT_ONCE jobs answers the usual case (none exists, so no key
-- holds another type); only when some exist is each one's type looked at.
local EXISTS_AT_ONCE = 1000 -- (unpack's limit is a few thousand values)
local function flowExists(nodes)
  local existing = 0
  for b = 0, #nodes - 1, EXISTS_AT_ONCE do
    local jks = {}
    for i = 1, math.min(EXISTS_AT_ONCE, #nodes - b) do jks[i] = nodes[b + i].jk end
    existing = existing + redis.call('EXISTS', unpack(jks))
  end
  if existing == 0 then return false end
  local first = nil
  existing = 0
  for i = 1, #nodes do
    local n = nodes[i]
    -- one TYPE answers both: 'none' (new), 'hash' (exists), anything else (another program's key)
    local t = redis.call('TYPE', n.jk)['ok']
    if t ~= 'none' then
      if t ~= 'hash' then requireKeyType(n.jk, 'hash') end
      existing = existing + 1
      first = first or n.jk
    end
  end
  if existing < #nodes then
    refuse('ERR_INVALID', 'glidemq_addFlow: job ' .. first .. ' exists already, and other jobs of the flow do not: ' ..
      'a flow is stored whole with new jobs (give its jobs other ids)')
  end
  return true
end

local META_TYPES = { 'meta', 'hash' }

-- The keys of queue `k` the write phase writes for the call's nodes in it (as requireTypes takes
-- them), and whether the queue is new (no createdAt: ensureQueue then creates its job and wake
-- streams' groups). meta is read here (its createdAt, and eventsUntil, which `listening` keeps
-- for the call): the read answers its type. The event stream is written only while a QueueEvents
-- listens (a flow's events, see insertParent), the job stream only for a leaf (a parent is queued
-- by the settle that frees it, which checks then) and the wake stream for a leaf that is delayed,
-- prioritized or LIFO (a group's keys, with its wake, groupRequireTypes checks); the sets only the
-- nodes' options use (waiting-children for a parent; scheduled, prioritized, LIFO for a leaf that
-- is delayed, prioritized or LIFO).
local function flowWriteTypes(k, nodes, now)
  -- (eventsUntil third, where `listening` reads it in a caller's HMGET of meta)
  local m = redis.pcall('HMGET', k.meta, 'createdAt', 'paused', 'eventsUntil')
  if m.err then requireTypes(k, META_TYPES) end
  local fresh = not m[1]
  local spec = {}
  local seen = {}
  local function need(name, t)
    if not seen[name] then
      seen[name] = true
      spec[#spec + 1], spec[#spec + 2] = name, t
    end
  end
  if listening(k, now, m) then need('events', 'stream') end
  if fresh then
    need('stream', 'stream')
    need('wake', 'stream')
  end
  for i = 1, #nodes do
    local n = nodes[i]
    if n.k ~= k then
      -- (another queue's node: each queue's look passes over the call's nodes, as no list per queue is built)
    elseif #n.depList > 0 then
      need('waitingChildren', 'zset')
    else
      need('stream', 'stream')
      if n.delay > 0 then need('scheduled', 'zset') end
      if n.priority > 0 then need('prioritized', 'zset') end
      if n.lifo then need('lifo', 'list') end
      if n.delay > 0 or n.priority > 0 or n.lifo then need('wake', 'stream') end
    end
  end
  return spec, fresh
end

-- The types of every key the write phase writes; the state of every parent outside the call.
-- Returns the queues that are new (their key tables), which the write phase creates.
local function checkFlowWrites(nodes, outside, now)
  local seen, order = {}, {} -- a queue's keys are checked once, however many of its jobs the flow holds
  for i = 1, #nodes do
    local n = nodes[i]
    if not seen[n.k] then
      seen[n.k] = true
      order[#order + 1] = n.k
    end
    if n.group then groupRequireTypes(n.k, n.group.id) end
    if #n.depList > 0 then requireKeyType(FLOW.depsOf(n.jk), 'set') end
  end
  local fresh = {}
  for _, k in ipairs(order) do
    local spec, new = flowWriteTypes(k, nodes, now)
    requireTypes(k, spec)
    if new then fresh[#fresh + 1] = k end
  end
  for key, o in pairs(outside) do
    local state = redis.call('HGET', key, 'state')
    if not state then
      refuse('ERR_JOB_NOT_FOUND', 'glidemq_addFlow: parent job ' .. key .. ' does not exist: add the parent first, or add the child without parent')
    end
    if state == 'completed' or state == 'failed' then
      refuse('ERR_JOB_STATE', 'glidemq_addFlow: parent job ' .. key .. ' is ' .. state .. ': a finished job takes no children')
    end
    requireKeyType(FLOW.depsOf(key), 'set')
  end
  return fresh
end

-- Writes a parent node: its hash waiting for its children (state 'waiting-children'), its deps,
-- and its place in the queue's waiting-children set (scored by the server's now). `quiet`: no
-- QueueEvents listens (lua/events.lua), so its events are not written.
local function insertParent(n, now, quiet)
  local k, id, jk = n.k, n.jobId, n.jk
  -- flow 'p': it has dependency keys, which its removal deletes (FLOW.mark)
  local fields = { 'name', n.name, 'data', n.data, 'ts', now, 'state', 'waiting-children', 'flow', 'p' }
  local function put(f, v)
    fields[#fields + 1] = f
    fields[#fields + 1] = v
  end
  if n.parents ~= '' then put('parents', n.parents) end
  if n.priority > 0 then put('priority', n.priority) end
  if n.lifo then put('lifo', '1') end
  if n.attempts > 1 then put('attempts', n.attempts) end
  if n.opts ~= '' then put('opts', n.opts) end
  if n.delay > 0 then put('delay', n.delay) end
  if n.group then
    groupConfigure(k, n.group, now)
    put('grp', n.group.id)
  end
  redis.call('HSET', jk, unpack(fields))
  redis.call('SADD', FLOW.depsOf(jk), unpack(n.depList))
  redis.call('ZADD', k.waitingChildren, now, id)
  if quiet then return end
  -- (QueueEvents: 'added', then 'waiting-children', not 'waiting')
  emit(k, 'added', id, 'waitingChildren', '1')
  emit(k, 'waiting-children', id)
end

-- glidemq_addFlowPart's head: glidemq_addFlow's, with the part's flow id, journal and links (lua/flow-parts.lua)
local FLOW_PART_HEAD = { 'maxPayload', ARG.int(0, MAX_SAFE_INT), 'producer', ARG.producer,
  'seq', ARG.callSeq, 'answeredBelow', ARG.callSeq, 'flowId', JOB_KEYS,
  'journal', ARG.orEmpty(ARG.jsonObject), 'links', JOB_KEYS, 'count', ARG.count }

--[[ Stores the nodes `nodes` (decoded args `a`) in the queues of `keys`: a whole flow
  (glidemq_addFlow), or with `part` one part of a flow stored across slots (glidemq_addFlowPart). ]]
local function storeFlow(keys, a, nodes, part)
  local queues, bases = flowQueues(keys)
  ARG.checkProducerCall('glidemq_addFlow', a)
  local pk, kept, low = producerCall(queues[1], a.producer, a.seq, true)
  if kept then return kept end
  -- check phase: every node, every link, every key, before the first write
  local byKey = checkNodes(a, nodes, queues)
  local journalStored = part and FLOW_PART.checkJournal(queues[1], a)
  if part then FLOW_PART.promiseLinks(nodes, byKey) end
  local outside = checkLinks(nodes, byKey, bases)
  if part then FLOW_PART.restoreLinks(nodes, outside, FLOW_PART.links(a, bases)) end
  local resent = journalStored or flowExists(nodes)
  local now = serverNow()
  local fresh = not resent and checkFlowWrites(nodes, outside, now)
  local out = { now, resent and 0 or 1 }
  if not resent then
    for i = 1, #fresh do ensureQueue(fresh[i]) end
    local childExtra = { 'parents', false } -- (insertJob copies it: one table for every child)
    for i = 1, #nodes do
      local n = nodes[i]
      -- a flow's 'added' and 'waiting-children' events, one per node, are written only while a
      -- QueueEvents listens, as the per-job events are (lua/events.lua; read once per queue)
      local quiet = not listening(n.k, now)
      if #n.depList > 0 then
        insertParent(n, now, quiet)
      else
        -- a child: its `parents` make its finish settle them (lua/flow-keys.lua)
        local extra = nil
        if n.parents ~= '' then
          childExtra[2] = n.parents
          extra = childExtra
        end
        insertJob(n.k, now, n.jobId, n.name, n.data, n.delay, n.priority, n.lifo, n.attempts, n.opts, n.group, extra, quiet)
      end
    end
    for key, o in pairs(outside) do
      if #o.children > 0 then
        redis.call('SADD', FLOW.depsOf(key), unpack(o.children))
        FLOW.mark(key, 'p')
      end
    end
    if part then FLOW_PART.storeJournal(queues[1], a, now) end
  end
  if pk then rememberReply(pk, a.seq, a.answeredBelow, low, out) end
  return out
end

register('glidemq_addFlow', function(keys, args)
  local a, nodes = decodeArgs('glidemq_addFlow', args, FLOW_HEAD, FLOW_NODE, 'count')
  return storeFlow(keys, a, nodes)
end)

register('glidemq_addFlowPart', function(keys, args)
  local a, nodes = decodeArgs('glidemq_addFlowPart', args, FLOW_PART_HEAD, FLOW_NODE, 'count')
  return storeFlow(keys, a, nodes, true)
end)

register('glidemq_settle', function(keys, args)
  local k = keysFor(keys[1])
  local _, records = decodeArgs('glidemq_settle', args, COUNT_HEAD, SETTLE_EACH, 'count')
  for i, r in ipairs(records) do
    if r.childKey == '' or string.find(r.childKey, '%s') then
      refuse('ERR_INVALID', 'glidemq_settle: group #' .. i .. ' childKey must be one job key, got ' .. showArg(r.childKey))
    end
    FLOW.checkParent(k, r.parentId, r.kind, 0)
  end
  local now, changed, relay = serverNow(), 0, false
  for _, r in ipairs(records) do
    local c, rl = FLOW.settleOne(k, r.parentId, r.childKey, r.kind, r.value, now, 0)
    if c then changed = changed + 1 end
    relay = relay or rl
  end
  return { changed, relay and 1 or 0 }
end)

register('glidemq_outboxDone', function(keys, args)
  local k = keysFor(keys[1])
  local _, records = decodeArgs('glidemq_outboxDone', args, COUNT_HEAD, OUTBOX_DONE_EACH, 'count')
  requireTypes(k, OUTBOX_TYPES)
  return FLOW.outboxDone(k.flowOutbox, records, 'field', 'value')
end)

register('glidemq_outboxList', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_outboxList', args, OUTBOX_LIST_ARGS)
  requireTypes(k, OUTBOX_TYPES)
  return FLOW.outboxList(k.flowOutbox, a.minAgeMs, a.count)
end, { 'no-writes' })

register('glidemq_moveToWaitingChildren', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_moveToWaitingChildren', args, WAIT_CHILDREN_ARGS)
  local id = a.jobId
  local jk = jobKey(k, id)
  local cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'failedBy')
  if not cur[1] then
    refuse('ERR_JOB_NOT_FOUND', 'job ' .. id .. ' does not exist (removed while it ran?): cannot move it to waiting-children')
  end
  if cur[1] ~= 'active' or tonumber(cur[2]) ~= a.fence or cur[3] ~= a.consumer then return 'stale' end
  if cur[5] then return 'failed:' .. cur[5] end
  requireKeyType(FLOW.depsOf(jk), 'set')
  if string.find(a.childKey, '%s') then
    refuse('ERR_INVALID', 'glidemq_moveToWaitingChildren: childKey must be one job key, got ' .. showArg(a.childKey))
  end
  if redis.call('SCARD', FLOW.depsOf(jk)) == 0 then return 'none' end
  if a.childKey ~= '' then
    -- (SMEMBERS, not SISMEMBER: the documented ACL roles allow the commands the library used already)
    local unsettled = false
    for _, c in ipairs(redis.call('SMEMBERS', FLOW.depsOf(jk))) do
      if c == a.childKey then unsettled = true end
    end
    if not unsettled then return 'none' end
  end
  requireReleaseTypes(k, cur[4])
  requireTypes(k, WAIT_TYPES)
  releaseActive(k, id, jk)
  -- parkFence: this claim may still write the job's data, progress and logs until its next claim
  redis.call('HSET', jk, 'state', 'waiting-children', 'parkFence', a.fence)
  redis.call('ZADD', k.waitingChildren, serverNow(), id)
  emit(k, 'waiting-children', id)
  return 'waiting'
end)

register('glidemq_removeChildDependency', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_removeChildDependency', args, REMOVE_DEP_ARGS)
  local jk = jobKey(k, a.jobId)
  requireKeyType(jk, 'hash')
  if redis.call('EXISTS', jk) == 0 then
    refuse('ERR_JOB_NOT_FOUND', 'job ' .. a.jobId .. ' does not exist: removeChildDependency has no child to remove')
  end
  local parents = redis.call('HGET', jk, 'parents')
  if not parents then return { 0, 0 } end
  FLOW.checkParents(k, parents, 'remove')
  local relay = FLOW.settleParents(k, jk, parents, 'remove', '', serverNow())
  redis.call('HDEL', jk, 'parents')
  if FLOW.hasChildren(redis.call('HGET', jk, 'flow')) then redis.call('HSET', jk, 'flow', 'p') else redis.call('HDEL', jk, 'flow') end
  return { 1, relay and 1 or 0 }
end)

register('glidemq_releaseParents', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_releaseParents', args, RELEASE_PARENTS_ARGS)
  requireTypes(k, FLOW_QUEUE_TYPES)
  local now = serverNow()
  local page = redis.call('ZRANGE', k.waitingChildren, a.start, a.start + a.count - 1, 'WITHSCORES')
  local stuck = {}
  for i = 1, #page, 2 do
    local id = page[i]
    local jk = jobKey(k, id)
    requireKeyType(FLOW.depsOf(jk), 'set')
    if tonumber(page[i + 1]) <= now - a.minAgeMs and redis.call('SCARD', FLOW.depsOf(jk)) == 0 and
      redis.call('HGET', jk, 'state') == 'waiting-children' then
      stuck[#stuck + 1] = id
      if not a.check then FLOW.checkParent(k, id, 'completed', 0) end
    end
  end
  local next = #page < 2 * a.count and 0 or a.start + a.count
  if a.check then return { #stuck, next } end
  for _, id in ipairs(stuck) do
    redis.call('ZREM', k.waitingChildren, id)
    FLOW.releaseParent(k, id, jobKey(k, id), now)
  end
  -- the released parents left the set: the next look starts as many ranks earlier
  return { #stuck, math.max(0, next - #stuck) }
end)
end
