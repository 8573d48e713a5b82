--[[ flow-parts.lua — a flow stored in parts (no registered functions here): FLOW_PART, what
  glidemq_addFlowPart (lua/flow.lua) adds to glidemq_addFlow. On a Valkey Cluster a flow whose
  queues span several hash slots cannot be one call: the client sends one part per slot (and per
  level: a parent's part before its children's), and the first part, in the slot of the flow's
  first node, stores the journal of the remaining parts beside its nodes.
  Keys, in the queue of the first part's KEYS[1] (src/engine/shared/keys.ts spells them too):
    <base>:flows       hash: flow id (the job key of the flow's first node) -> the journal, JSON
                       {parts: [{keys, args}]}: every remaining part's KEYS and ARGV.
    <base>:flows-due   zset: the same flow ids, scored by the server's ms the journal was written.
  The producer runs the remaining parts and then deletes the journal (glidemq_flowJournalDone,
  lua/flow-journal.lua); maintenance replays a journal a dead producer left once it is older than
  a grace period (glidemq_flowJournalDue): every part is idempotent (its nodes exist: stored), so a
  replay rolls the flow forward and a repeat changes nothing.
  In a part, a link to a node outside the part is the journal's promise: that node is stored by its
  own part (a parent's part runs before its children's), so it is neither checked nor written here.
  A child of an existing job (a job added with `parent` to a queue in another slot, or a child a
  running parent adds) is registered in its parent's deps by the first part, in the parent's slot
  (`links`), before the child's own part stores it.
]]
local FLOW_PART = {}
do
local JOURNAL_TYPES = { 'flows', 'hash', 'flowsDue', 'zset' }

-- Whether the first part's journal exists (the part was stored: a resend); false for a later part.
FLOW_PART.checkJournal = function(k, a)
  if a.flowId == '' or string.find(a.flowId, '%s') then
    refuse('ERR_INVALID', 'glidemq_addFlowPart: flowId must be one job key (the flow\'s first node\'s), got ' .. showArg(a.flowId))
  end
  if a.journal == '' then return false end
  requireTypes(k, JOURNAL_TYPES)
  return redis.call('HEXISTS', k.flows, a.flowId) == 1
end

-- Takes every link to a job outside the part out of the nodes' lists the checks read (kept whole
-- for the writes, FLOW_PART.restoreLinks): such a link is the journal's promise.
FLOW_PART.promiseLinks = function(nodes, byKey)
  for _, n in ipairs(nodes) do
    n.allParents, n.allDeps = n.parentList, n.depList
    local ps, ds = {}, {}
    -- (a promise is written as it is: it must be a job key)
    for _, p in ipairs(n.parentList) do
      if byKey[p] then ps[#ps + 1] = p else FLOW.requireJobKey(p, 'glidemq_addFlowPart: job ' .. n.jk .. ': parent') end
    end
    for _, d in ipairs(n.depList) do
      if byKey[d] then ds[#ds + 1] = d else FLOW.requireJobKey(d, 'glidemq_addFlowPart: job ' .. n.jk .. ': dependency') end
    end
    n.parentList, n.depList = ps, ds
  end
end

-- The part's links ('<parentKey> <childKey> ...') as a list of {parent, child}, each parent of a
-- queue in KEYS (`bases`).
FLOW_PART.links = function(a, bases)
  local words = FLOW.words(a.links)
  if #words % 2 == 1 then
    refuse('ERR_INVALID', 'glidemq_addFlowPart: links must be pairs of job keys (<parentKey> <childKey>), got ' .. #words .. ' keys')
  end
  local out = {}
  for i = 1, #words, 2 do
    local base = FLOW.splitJobKey(words[i])
    if not bases[base] then
      refuse('ERR_INVALID', 'glidemq_addFlowPart: the queue of parent ' .. words[i] .. ' (links) is not among KEYS')
    end
    out[#out + 1] = { parent = words[i], child = words[i + 1] }
  end
  return out
end

-- Gives the nodes their whole links back, and adds the part's links to `outside` (the existing
-- parents the write phase registers children in), leaving out a child that settled in its parent
-- already (a resend after the journal was deleted must not make the parent wait for it again).
FLOW_PART.restoreLinks = function(nodes, outside, links)
  for _, n in ipairs(nodes) do n.parentList, n.depList = n.allParents, n.allDeps end
  for _, l in ipairs(links) do
    local base, id = FLOW.splitJobKey(l.parent)
    local o = outside[l.parent] or { k = keysFor(base .. ':meta'), id = id, children = {} }
    outside[l.parent] = o
    local settled = false
    for _, h in ipairs({ FLOW.processedOf(l.parent), FLOW.failedOf(l.parent), FLOW.ignoredOf(l.parent) }) do
      requireKeyType(h, 'hash')
      if redis.call('HEXISTS', h, l.child) == 1 then settled = true end
    end
    if not settled then o.children[#o.children + 1] = l.child end
  end
end

-- Stores the first part's journal (a later part has none), scored by the server's now.
FLOW_PART.storeJournal = function(k, a, now)
  if a.journal == '' then return end
  redis.call('HSET', k.flows, a.flowId, a.journal)
  redis.call('ZADD', k.flowsDue, now, a.flowId)
end
end
