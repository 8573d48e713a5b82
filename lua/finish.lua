--[[ finish.lua — glidemq_finish, glidemq_finishMany: complete or fail claims, then fetch the next jobs.
  At most one call per job in steady state: the worker's results go in, its next jobs come out.
  Each call reads every job it finishes and checks the type of every key it will write (the job
  hashes are read, so a job key of another type raises there) before its first write: a refused
  call changes nothing. Times (finishedOn, the finished sets' scores, the due time of a retry,
  the metrics minute, retention by age, the next jobs' processedOn and lockedAt) are the server's
  TIME, read once per call.

  glidemq_finish
  KEYS[1]  meta key.
  ARGV[1]  jobId: the job the worker ran.
  ARGV[2]  fence: the fence of its claim (the claim reply's second element).
  ARGV[3]  consumer: the worker's consumer name.
  ARGV[4]  outcome: 'completed', 'failed', or 'failed:' followed by the error's stack (at most
           4096 bytes): the job keeps the newest 10 stacks of its failed attempts, a JSON array
           in its hash's `stacktrace` (BullMQ's job.stacktrace). Only a failure carries a stack,
           so a completion costs nothing more (src/engine/shared/stacktrace.ts).
  ARGV[5]  value: the return value (JSON text) for completed, the failure reason for failed.
  ARGV[6]  retryDelay: -1 = do not retry; else ms from the server's now until the retry may run
           (0 = at once), used while attempts are left.
  ARGV[7]  fetchCount: next jobs wanted (0..10000).
  ARGV[8]  keep: the retention rule for the outcome (the job's removeOnComplete or removeOnFail):
           '' keep all | '0' remove at once | 'count:N' keep the newest N | 'age:MS' keep those
           finished within MS ms | 'agecount:MS:N' keep those that satisfy both (N newest, within
           MS ms). At most 100 jobs are removed per finish.
  ARGV[9]  durationMs: processing time (ms), counted in the per-minute metrics (lua/metrics.lua)
           and the lifetime histogram (lua/metrics-buckets.lua metricsKeys(k).lifetime).
  ARGV[10] ahead: '1' marks the next jobs not started (a worker's prefetch, lua/activate.lua),
           '0' does not.
  ARGV[11] lockMs: the worker's lockDuration in ms, recorded with each next job's claim (its
           terms, lua/activate.lua): stalled recovery judges the claim by it.
  ARGV[12] maxStalledCount: the worker's maxStalledCount, recorded with each next job's claim.
  A failure of a claim that was revoked while it ran (lua/revoke.lua) is stored as a failure for
  good with the reason 'revoked', whatever `value` and `retryDelay` say; a completion stands.
  Returns  {status, next1, next2, ...} where status is 'completed' | 'failed' | 'retried' |
           'delayed' | 'stale' (the caller no longer owns the claim: nothing was changed) |
           'missing' (the job was removed while it ran); next jobs are claim replies (lua/activate.lua);
           last, the string '{relay}' when the finish wrote an outbox record for a parent in
           another slot of a cluster (lua/flow-keys.lua), or a dead letter for a dead-letter
           queue in another slot (lua/dead-letters.lua): the worker relays it.
           A repeated finish (sent again after its reply was lost) of a job this claim completed
           or failed for good gets that status again, and changes nothing; so does one whose
           claim put the job back for a retry ('retried' or 'delayed': the job's `rf` field keeps
           '<fence>:<status>' of the last 8 such finishes), even once the job is claimed and
           finished again; so does one whose finish removed the job (keep '0', or a rule that
           dropped the job itself, such as age 0), or whose retry a later claim's finish that
           removed the job kept: such a finish records the job id with those marks in the
           queue's removed-finishes hash (a ring of each consumer's last 16 such calls, deleted
           with the consumer; a record answers for 5 minutes by the server's clock). A finish of a claim that stored nothing gets
           'stale' or 'missing'.
  Errors   ERR_INVALID (an argument, named), ERR_WRONG_TYPE (a key it writes holds another type).

  glidemq_finishMany — the same for several jobs of one consumer in one call (a worker sends the
  results that are ready together), each job exactly as glidemq_finish would finish it in
  argument order (a job named twice: the second finish finds it finished, 'stale', or removed,
  'missing').
  KEYS[1]  meta key.
  ARGV[1]  consumer: the worker's consumer name.
  ARGV[2]  count: the number of jobs (0..10000).
  ARGV[3]  fetchCount: next jobs wanted for the whole batch (0..10000).
  ARGV[4]  ahead: '1' marks the next jobs not started (a worker's prefetch), '0' does not.
  ARGV[5]  started: the claims this worker's processors took since its last call, that were
           handed out marked not started: job id and fence pairs joined by spaces ('' for
           none). Each mark is cleared while it is the claim's (a reclaim then counts a stall
           for it); a pair whose claim moved on, or whose job is gone, changes nothing.
  ARGV[6]  lockMs: the worker's lockDuration in ms, recorded with each next job's claim.
  ARGV[7]  maxStalledCount: the worker's maxStalledCount, recorded with each next job's claim.
  ARGV[8..]  `count` groups of 7 arguments, one per job, each as for glidemq_finish:
    group.jobId: the job the worker ran.
    group.fence: the fence of its claim.
    group.outcome: 'completed', 'failed', or 'failed:' followed by the error's stack.
    group.value: the return value (JSON text), or the failure reason.
    group.retryDelay: -1 = do not retry; else ms from the server's now until the retry.
    group.keep: the retention rule for the outcome ('' | '0' | 'count:N' | 'age:MS' | 'agecount:MS:N').
    group.durationMs: processing time (ms), for the metrics.
  Returns  {status1, ..., statusN, next1, next2, ...}: one status per job in argument order, then
           up to fetchCount next jobs, then '{relay}' as glidemq_finish's. A job the call refuses (a bad argument of its group, or its
           job key holding another type) is left as it was, and its status is that coded error
           (an error reply in its slot: ERR_INVALID naming the group, ERR_WRONG_TYPE); the other
           jobs are finished as if it had not been sent.
  Errors   ERR_INVALID (a head argument; a count that does not match the groups sent),
           ERR_WRONG_TYPE (a key shared by the call: metrics, the fetch's keys). Every job is
           checked before the first write.

  A failure for good is stored by lua/outcomes.lua storeFailure, as stalled recovery stores one.
  A child (a job with `parents`) that completes, or fails for good with a failure policy, settles
  its parents in the same call (lua/flow-keys.lua): inline in its own queue and, on a standalone
  server, in any queue; on a cluster by an outbox record for a parent in another queue. A job
  without parents pays one field more in the read of its hash.
  Events   'failed' and 'retrying' (with `delay`, ms from the server's now, for a retry after a
           backoff) always. On the hot path one XADD per job is a tenth of a finish's cost, so
           the per-job events are written only where something reads them: 'completed' on a
           queue with a globalConcurrency limit, whose workers wait on the events stream for a
           finish that frees a slot (src/engine/consuming/change-waiter.ts), and while a QueueEvents listens
           (meta's eventsUntil ahead of the server's now, lua/events.lua; read in the HMGET of
           meta the call makes anyway): then 'completed' carries the returnvalue, a job that
           fails for good with its attempts used up also gets 'retries-exhausted' (attemptsMade),
           and a call that wanted next jobs and found none waiting writes 'drained'.
           Completions are in the completed set and the metrics either way.
]]
-- Its locals stay inside this block: the main chunk may hold at most 200 (lua/ORDER).
do
-- 'completed', 'failed', or 'failed:<stack>' (see the header; stacktrace.ts MAX_STACK_BYTES agrees).
local MAX_STACK_BYTES = 4096
local MAX_STACKS = 10
local OUTCOME = kind("'completed', 'failed', or 'failed:' and a stack of at most " .. MAX_STACK_BYTES .. ' bytes', function(v)
  if v == 'completed' or v == 'failed' then return v end -- (the hot path: two comparisons)
  if string.sub(v, 1, 7) == 'failed:' and #v <= 7 + MAX_STACK_BYTES then return v end
  return nil
end)
-- Claims reported started: '' or 'id fence id fence ...' (a job id holds no whitespace), decoded
-- into a list of { id, fence } (at most MAX_COUNT).
local STARTED = kind("'' or job id and fence pairs joined by spaces", function(v)
  local out = {}
  if v == '' then return out end
  local words = {}
  for w in string.gmatch(v, '%S+') do words[#words + 1] = w end
  if #words % 2 ~= 0 or #words > 2 * MAX_COUNT then return nil end
  for i = 1, #words, 2 do
    local id, fence = ARG.jobId.check(words[i]), ARG.fence.check(words[i + 1])
    if not id or not fence then return nil end
    out[#out + 1] = { id, words[i + 1] }
  end
  return out
end)
local FINISH_ARGS = { 'jobId', ARG.jobId, 'fence', ARG.fence, 'consumer', ARG.nonEmpty,
  'outcome', OUTCOME, 'value', ARG.any, 'retryDelay', ARG.int(-1, MAX_SAFE_INT),
  'fetchCount', ARG.count, 'keep', KEEP_RULE, 'durationMs', ARG.ms, 'ahead', ARG.flag,
  'lockMs', ARG.ms, 'maxStalledCount', ARG.int(0, 1000000000) }
local FINISH_MANY_HEAD = { 'consumer', ARG.nonEmpty, 'count', ARG.count, 'fetchCount', ARG.count,
  'ahead', ARG.flag, 'started', STARTED, 'lockMs', ARG.ms, 'maxStalledCount', ARG.int(0, 1000000000) }
local RETRY_DELAY = ARG.int(-1, MAX_SAFE_INT)
local FINISH_MANY_JOB = { 'jobId', ARG.jobId, 'fence', ARG.fence, 'outcome', OUTCOME,
  'value', ARG.any, 'retryDelay', RETRY_DELAY, 'keep', KEEP_RULE, 'durationMs', ARG.ms }
-- A job's group decoded in one step (args.lua readGroup): each argument checked by its kind in
-- FINISH_MANY_JOB, and the table built whole, with the fields planFinish adds (jk: the job key,
-- kids: whether it has flow children).
FINISH_MANY_JOB.read = function(args, at)
  local id, fence, outcome = ARG.jobId.check(args[at]), ARG.fence.check(args[at + 1]), OUTCOME.check(args[at + 2])
  local retryDelay, keep, durationMs = RETRY_DELAY.check(args[at + 4]), KEEP_RULE.check(args[at + 5]), ARG.ms.check(args[at + 6])
  if not (id and fence and outcome and retryDelay and keep and durationMs) then return nil end
  return { jobId = id, fence = fence, outcome = outcome, value = args[at + 3], retryDelay = retryDelay, keep = keep,
    durationMs = durationMs, jk = false, kids = false }
end
-- The keys each outcome writes besides the claim's own (activate.lua requireReleaseTypes); a
-- failure for good writes FAILURE_TYPES (lua/outcomes.lua).
local FINISH_TYPES = {
  completed = { 'completed', 'zset' },
  delayed = { 'scheduled', 'zset', 'readyGroups', 'zset', 'events', 'stream', 'wake', 'stream' },
  events = { 'events', 'stream' },
  record = { 'removedFinishes', 'hash' },
}
-- The retry marks a job keeps in `rf` (the newest), and the removal records kept: per consumer,
-- its last REMOVAL_RECORDS.slots calls that removed jobs they finished (a repeat is sent again by the same
-- consumer, and only the calls it had in flight when its connection broke are repeated), and how
-- long one answers a repeat (ms of the server's clock). A bounded ring per consumer, not a log of
-- every call: the memory stays a few KiB per live consumer whatever the throughput.
local RF_KEEP = 8
local RECORD_MS = 300000

-- The status that marks list `marks` ('<fence>:<status>' words, the newest last: a job's `rf`, or
-- a removal record) gives claim `fence`, or nil.
local function markOf(marks, fence)
  for f, status in string.gmatch(marks or '', '(%d+):(%a+)') do
    if tonumber(f) == fence then return status end
  end
  return nil
end

-- `marks` with claim `fence`'s `status` added as the newest, keeping the newest RF_KEEP (a job
-- retried, claimed and finished again before a repeat arrives keeps the repeat's answer).
local function withMark(marks, fence, status)
  -- (a job's first mark, as every job removed when it finishes has: no list to cut)
  if not marks then return (ARG.smallText[fence] or string.format('%d', fence)) .. ':' .. status end
  local words = {}
  for w in string.gmatch(marks or '', '%S+') do words[#words + 1] = w end
  words[#words + 1] = string.format('%d:%s', fence, status)
  local from = math.max(1, #words - RF_KEEP + 1)
  local out = words[from]
  for i = from + 1, #words do out = out .. ' ' .. words[i] end
  return out
end

-- The status a finish of claim `fence` stored for job `id` before a finish removed the job (its
-- own, or a later claim's that kept the marks of the retries before it), from removed-finishes,
-- or nil. Only records younger than RECORD_MS by the server's clock answer, the newest record of
-- an id first (a custom id added again after its removal is a new job, whose claims count from
-- fence 1 again). Read only when a finish finds no job (off the hot path): every consumer's ring.
local function removedFinish(k, id, fence)
  local oldest = serverNow() - RECORD_MS
  local all = redis.call('HGETALL', k.removedFinishes)
  local newest, marks = oldest - 1, nil
  local needle = ' ' .. id .. '='
  for i = 1, #all, 2 do
    local record = all[i + 1]
    local ms = string.find(all[i], '^%d+:') and tonumber(string.match(record, '^(%d+)'))
    local at = ms and ms >= oldest and ms > newest and string.find(record, needle, 1, true)
    if at then
      newest, marks = ms, string.match(record, '^([^ ]*)', at + #needle)
    end
  end
  return marks and markOf(string.gsub(marks, ',', ' '), fence)
end

-- Whether the last job planFinish read was plain (lua/activate.lua): it expects the next to be
-- of the same kind (kept between calls: a queue's jobs are mostly of one kind).
local expectPlain = true

--[[ The check phase for one job `j` (a decoded argument group), writing nothing: reads the job's
  hash, decides its status and checks the types of the keys the write phase will write for it.
  Returns status ('completed', 'failed', 'retried', 'delayed', 'stale' or 'missing'), then for an
  owned claim: its job key, src, stream entry id, attempts made, whether its writes may put a
  job in a list (a released list claim, a requeue), and the job's retry marks (`rf`, or nil). A
  stream claim's entry is acked by the XACK that opens the caller's write phase (which so checks
  the stream's type). `seen` (finishMany):
  the status a later finish of an id gets once an earlier job of the call finished it.
  `announce`: 'completed' is emitted (a limit, or a QueueEvents listening). (Results go back as
  values, not as fields of `j`: growing the decoded table per job costs more than the rest of the
  plan; see glidemq_finishMany. A child whose finish settles its parents alone gets two: j.parents,
  its `parents` field, and j.flowKind, the kind of settlement, lua/flow-keys.lua; a plain job's
  table never has them.) ]]
local function planFinish(k, j, consumer, seen, announce)
  local id = j.jobId
  if seen and seen[id] then return seen[id] end
  local jk = k.jobPrefix .. id -- (jobKey's name, without a call per job)
  local keep = j.keep
  -- (the claim's terms say whether the job is plain, lua/activate.lua: a plain job's claim saw no
  -- rf, flow or parents field, and none was given it since, so they are read only for another.
  -- Expecting the job to be like the last one finished, the read takes the terms, or those three
  -- fields as it did before the mark: a flow's jobs pay nothing for it, and a change of kind
  -- costs one more read. `at`: where the attempt counts and revoked are.)
  local plainRead, cur, at = expectPlain, nil, 7
  if plainRead then
    if j.outcome == 'completed' and keep == '0' then
      -- the job is deleted: its attempt counts are not needed (two strings fewer each way)
      cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'terms')
    elseif j.outcome == 'completed' then
      cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'terms', 'attemptsMade', 'attempts')
    else
      -- a failure reads whether its claim was revoked (lua/revoke.lua): it then fails for good as 'revoked'
      cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'terms', 'attemptsMade', 'attempts', 'revoked')
    end
  else
    -- (a flow child's `parents` is read with the rest, after `flow`: no HGET per child below)
    at = 9
    if j.outcome == 'completed' and keep == '0' then
      cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'rf', 'flow', 'parents')
    elseif j.outcome == 'completed' then
      cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'rf', 'flow', 'parents', 'attemptsMade', 'attempts')
    else
      cur = redis.call('HMGET', jk, 'state', 'fence', 'owner', 'src', 'sid', 'rf', 'flow', 'parents', 'attemptsMade', 'attempts', 'revoked')
    end
  end
  -- a flow job (FLOW.mark): a parent's dependency keys are deleted with it, a child's parents settled
  -- a finish of this claim that removed the job (or a later one that kept this claim's retry
  -- mark) recorded it: this call repeats it
  if not cur[1] then return removedFinish(k, id, j.fence) or 'missing' end
  -- (a small fence read from a table, as intKind reads one: tonumber runs strtod twice)
  if cur[1] ~= 'active' or (ARG.smallNumber[cur[2]] or tonumber(cur[2])) ~= j.fence or cur[3] ~= consumer then
    -- a finish of this claim already stored the outcome: this call repeats it (sent again after
    -- its reply was lost). Only a finish leaves a finished job with its claim's fence (a stall
    -- that fails a job moves the fence on, lua/reclaim.lua).
    if tonumber(cur[2]) == j.fence and (cur[1] == 'completed' or cur[1] == 'failed') then return cur[1] end
    -- a finish of this claim that put the job back for a retry left its mark (`rf`, applyFinish):
    -- the repeat gets the same status, whatever the job did since (a stall or release leaves no mark)
    local rf = cur[6]
    if plainRead then rf = redis.call('HGET', jk, 'rf') end
    return markOf(rf, j.fence) or 'stale'
  end
  -- the claim is this one: its terms' plain mark is its own (lua/activate.lua)
  local rf, role, parents = nil, nil, nil
  if not plainRead then
    rf, role, parents = cur[6] or nil, cur[7] or nil, cur[8]
    expectPlain = not (rf or role or parents)
  elseif cur[6] ~= PLAIN.last and not PLAIN.is(cur[6]) then
    local more = redis.call('HMGET', jk, 'rf', 'flow', 'parents')
    rf, role, parents = more[1] or nil, more[2] or nil, more[3]
    expectPlain = false
  end
  local src, sid = cur[4], cur[5]
  if cur[at + 2] and tonumber(cur[at + 2]) <= j.fence then
    -- (only a revoked claim's failure: no field is added to the decoded group)
    j.retryDelay, j.value = -1, 'revoked'
  end
  local lists = src ~= 's'
  if lists then requireReleaseTypes(k, src) end
  local made = cur[at] and toInt(cur[at], 0) + 1 or 1 -- (no attemptsMade read, or none stored: the first)
  local status
  -- a rule that may remove the job records the removal (removedFinish; checked once per call)
  if keep ~= '' and not rawget(k, FINISH_TYPES.record) then requireTypes(k, FINISH_TYPES.record) end
  if j.outcome == 'completed' then
    status = 'completed'
    if keep ~= '0' then requireTypes(k, FINISH_TYPES.completed) end
    if announce then requireTypes(k, FINISH_TYPES.events) end
  elseif j.retryDelay >= 0 and made < toInt(cur[at + 1], 1) then
    if j.retryDelay > 0 then
      status = 'delayed'
      requireTypes(k, FINISH_TYPES.delayed)
    else
      status = 'retried'
      requireRequeueTypes(k, redis.call('HGET', jk, 'grp') or nil)
      requireTypes(k, FINISH_TYPES.events)
      lists = true
    end
  else
    status = 'failed'
    requireTypes(k, keep ~= '0' and FAILURE_TYPES.kept or FAILURE_TYPES.removed)
    FAILURE_TYPES.dead.target(k) -- a dead-letter queue's keys (lua/dead-letters.lua): one meta field read
  end
  if seen then
    -- a final outcome with keep '0' deletes the job; anything else leaves it not active
    seen[id] = ((status == 'completed' or status == 'failed') and keep == '0') and 'missing' or 'stale'
  end
  -- a child that completed or failed for good settles its parents (lua/flow-keys.lua); a plain
  -- job (role and parents nil) makes no call here
  j.kids = role and FLOW.hasChildren(role) or false
  parents = (status == 'completed' or status == 'failed') and parents or nil
  if parents then
    local kind = status == 'completed' and 'completed' or FLOW.failureKind(redis.call('HGET', jk, 'opts'))
    if kind then
      -- a parent released inline may go to the priority or LIFO list (FLOW.planChild says)
      if FLOW.planChild(k, parents, kind) then lists = true end
      j.parents, j.flowKind = parents, kind
    end
  end
  return status, jk, src, sid, made, lists, rf
end

-- The job keys whose not-started mark (lua/activate.lua) the reported claims `started` clear: those
-- whose `ns` still holds the reported fence. Read in the check phase; a job key of another type is
-- skipped (never written).
local function startedMarks(k, started)
  local marks = {}
  for _, c in ipairs(started) do
    local jk = jobKey(k, c[1])
    local ns = redis.pcall('HGET', jk, 'ns')
    if ns == c[2] then marks[#marks + 1] = jk end
  end
  return marks
end

-- Whether a job id appears twice in `jobs` (then planFinish needs its `seen` table). A batch
-- rarely does: comparing a small one's ids pairwise costs less than building the table.
local function hasRepeatedId(jobs)
  local n = #jobs
  if n > 8 then return true end
  for i = 2, n do
    local id = jobs[i] and jobs[i].jobId -- (false: a refused job, see glidemq_finishMany)
    for j = 1, i - 1 do
      if id and jobs[j] and jobs[j].jobId == id then return true end
    end
  end
  return false
end

-- Appends the stack a failed attempt's outcome carries ('failed:<stack>') to the job's
-- `stacktrace` (a JSON array, the newest MAX_STACKS kept). A stored value that is not such an
-- array (another program wrote it) is started afresh: this never raises halfway through a call.
local function pushStack(jk, outcome)
  if #outcome <= 7 then return end
  local kept = {}
  local old = redis.call('HGET', jk, 'stacktrace')
  if old then
    local ok, t = pcall(cjson.decode, old)
    if ok and type(t) == 'table' then
      for _, s in ipairs(t) do
        if type(s) == 'string' then kept[#kept + 1] = s end
      end
    end
  end
  kept[#kept + 1] = string.sub(outcome, 8)
  local from = math.max(1, #kept - MAX_STACKS + 1)
  local out = {}
  for i = from, #kept do out[#out + 1] = kept[i] end
  redis.call('HSET', jk, 'stacktrace', cjson.encode(out))
end

-- The write phase for a job planFinish found owned (status completed, failed, retried or
-- delayed). A stream claim's entry was acked by the caller (see planFinish), which deletes it
-- after this; a list claim is released here. `now` is the server's time. `announce`: 'completed'
-- is emitted; `listen`: a QueueEvents listens (the per-job events are written, see the header).
-- `rf`: the job's retry marks. Returns, when the finish removed the job, the marks its removal
-- record keeps (this claim's outcome after them), else nil: the caller writes the records.
-- `doomed` (optional): the keys of a completed job removed at once go there, for the caller's one
-- DEL (lua/outcomes.lua settle).
local function applyFinish(k, j, status, jk, src, sid, made, now, announce, listen, rf, doomed)
  local id, value = j.jobId, j.value
  if src ~= 's' then releaseClaim(k, id, src, sid) end
  if status == 'completed' then
    local gone = settle(k, jk, id, k.completed, j.keep, now, made, 'completed', 'returnvalue', value, j.kids, doomed)
    if listen then
      emit(k, 'completed', id, 'returnvalue', value)
    elseif announce then
      emit(k, 'completed', id)
    end
    return gone and withMark(rf, j.fence, status) or nil
  end
  if j.keep ~= '0' or status ~= 'failed' then pushStack(jk, j.outcome) end
  if status == 'failed' then
    return storeFailure(k, jk, id, j.keep, now, made, value, listen) and withMark(rf, j.fence, status) or nil
  end
  redis.call('HDEL', jk, 'owner', 'lockedAt', 'src', 'ns', 'nsr')
  if status == 'delayed' then
    redis.call('HSET', jk, 'attemptsMade', made, 'failedReason', value, 'state', 'delayed', 'delay', j.retryDelay,
      'rf', withMark(rf, j.fence, status))
    scheduleDue(k, id, now + j.retryDelay, now)
    groupHoldDelayed(k, id, jk)
    emit(k, 'retrying', id, 'reason', value, 'delay', j.retryDelay)
    return nil
  end
  redis.call('HSET', jk, 'attemptsMade', made, 'failedReason', value, 'rf', withMark(rf, j.fence, status))
  requeue(k, id, jk)
  emit(k, 'retrying', id, 'reason', value)
  return nil
end

-- Records the jobs a call's finishes removed (`removed`: job id, marks, ...) in the next slot of
-- `consumer`'s ring in removed-finishes (lua/stale-consumers.lua REMOVAL_RECORDS), for a repeat of
-- any of them (removedFinish). A record is '<ms> <id>=<marks> ...' (marks joined by ','; a job id
-- holds no whitespace, '=' never follows one in a record).
local function recordRemoved(k, consumer, now, removed)
  local parts = { tostring(now) }
  for i = 1, #removed, 2 do
    local marks = removed[i + 1]
    -- (one mark, the common case, has no space to replace)
    if string.find(marks, ' ', 1, true) then marks = string.gsub(marks, ' ', ',') end
    parts[#parts + 1] = removed[i] .. '=' .. marks
  end
  local n = redis.call('HINCRBY', k.removedFinishes, 'n:' .. consumer, 1)
  redis.call('HSET', k.removedFinishes, REMOVAL_RECORDS.field(n, consumer), table.concat(parts, ' '))
end

register('glidemq_finish', function(keys, args)
  local k = keysFor(keys[1])
  local a = decodeArgs('glidemq_finish', args, FINISH_ARGS)
  -- check phase
  local now = serverNow()
  local m = redis.call('HMGET', k.meta, unpack(RATE.META))
  local listen = listening(k, now, m)
  local announce = listen or toInt(m[2], 0) > 0
  if listen then requireTypes(k, FINISH_TYPES.events) end -- 'drained' may be written
  local status, jk, src, sid, made, lists, rf = planFinish(k, a, a.consumer, nil, announce)
  local acked = jk and src == 's' and sid
  if jk then checkMetrics(k, now, status == 'completed', status ~= 'completed') end
  -- the XACK that opens the write phase raises on a stream of another type before any write
  if acked then rawset(k, STREAM_TYPES, true) end
  lists = checkFetch(k, a.fetchCount, m, lists or false)
  claimTerms(k, a.lockMs, a.maxStalledCount, m)
  -- write phase
  if jk then
    if acked then redis.call('XACK', k.stream, GROUP, sid) end
    local marks = applyFinish(k, a, status, jk, src, sid, made, now, announce, listen, rf)
    if acked then redis.call('XDEL', k.stream, sid) end
    if marks then recordRemoved(k, a.consumer, now, { a.jobId, marks }) end
    recordMetrics(k, now, status == 'completed', a.durationMs)
    metricsKeys(k).lifetime.attempt(k, status == 'completed', a.durationMs)
  end
  local relay = jk and a.parents and FLOW.settleParents(k, jk, a.parents, a.flowKind, a.value, now)
  local out, drained = fetchNext(k, a.consumer, now, a.fetchCount, m, lists, a.ahead)
  if drained then emit(k, 'drained', '') end
  table.insert(out, 1, status)
  if relay or (status == 'failed' and FAILURE_TYPES.dead.wroteRecord(k)) then out[#out + 1] = FLOW.RELAY_MARK end
  return out
end)

--[[ The check phase of glidemq_finishMany for `jobs` (decoded groups; false: a group decodeArgs
  refused, its coded error in `refused`): every job's hash is read and every key type checked,
  writing nothing. What the write phase needs per job goes in the plan's statuses (the reply),
  acks, and j.jk: an eighth field fits the decoded group's table as it is (a new table per job, or
  a ninth field, would grow a table per job on the hottest path). The src and sid of a list claim
  and the attempts made are kept only when needed (a job without a list src is a stream claim,
  acked by the caller). With `isolate`, a job whose check raises (a coded refusal: a key of its
  own holds another type) is left as it is, its status that coded error; without, the raise
  escapes (the caller plans again isolated: see glidemq_finishMany). ]]
local function planAll(k, jobs, refused, consumer, announce, isolate)
  local seen = hasRepeatedId(jobs) and {} or nil
  local p = { statuses = {}, acks = {}, lists = false, anyCompleted = false, anyFailed = false }
  local statuses, acks = p.statuses, p.acks
  for i = 1, #jobs do -- (a numeric loop: ipairs costs a function call per job)
    local j = jobs[i]
    local ok, status, jk, src, sid, made, jobLists, rf = false, refused and refused[i]
    if j then
      if isolate then
        ok, status, jk, src, sid, made, jobLists, rf = pcall(planFinish, k, j, consumer, seen, announce)
      else
        ok, status, jk, src, sid, made, jobLists, rf = true, planFinish(k, j, consumer, seen, announce)
      end
    end
    if not ok then
      -- refused (a bad argument, or a key of its own holds another type): this job is left as it
      -- is, its status is the coded error, and the others are finished as if it were not here
      if j then status = codedError('glidemq_finishMany', status) end
      jk = nil
    end
    statuses[i] = status
    if j then j.jk = jk end -- (cleared for a job refused when planned again isolated)
    if jk then
      if status == 'completed' then p.anyCompleted = true else p.anyFailed = true end
      if jobLists then p.lists = true end
      if src == 's' then
        if sid then acks[#acks + 1] = sid end
      elseif src then
        p.listSrcs, p.listSids = p.listSrcs or {}, p.listSids or {}
        p.listSrcs[i], p.listSids[i] = src, sid
      end
      if status ~= 'completed' or j.keep ~= '0' then
        p.mades = p.mades or {}
        p.mades[i] = made
      end
      if rf then
        p.rfs = p.rfs or {}
        p.rfs[i] = rf
      end
      if j.parents then p.flows = true end
    end
  end
  return p
end

register('glidemq_finishMany', function(keys, args)
  local k = keysFor(keys[1])
  -- A batch isolates its members: a job with a bad argument, or whose job key holds another type,
  -- is refused alone. Isolating each member costs a pcall per job on the hottest path, so the
  -- call decodes and plans the whole batch once without it, and only when that raises (it writes
  -- nothing) does it again isolated: the same result, paid for only by a batch with a refusal.
  local ok, a, jobs = pcall(decodeArgs, 'glidemq_finishMany', args, FINISH_MANY_HEAD, FINISH_MANY_JOB, 'count')
  local refused
  -- (false in jobs for a refused group, its error in refused; a bad head argument raises here)
  if not ok then a, jobs, refused = decodeArgs('glidemq_finishMany', args, FINISH_MANY_HEAD, FINISH_MANY_JOB, 'count', true) end
  local consumer = a.consumer
  -- check phase: every job's hash is read, and every key type checked, before the first write
  local now = serverNow()
  local m = redis.call('HMGET', k.meta, unpack(RATE.META))
  local listen = listening(k, now, m)
  local announce = listen or toInt(m[2], 0) > 0
  if listen then requireTypes(k, FINISH_TYPES.events) end -- 'drained' may be written
  local planned, p = pcall(planAll, k, jobs, refused, consumer, announce, false)
  if not planned then p = planAll(k, jobs, refused, consumer, announce, true) end
  local statuses, acks, lists, anyCompleted, anyFailed = p.statuses, p.acks, p.lists, p.anyCompleted, p.anyFailed
  local mades, listSrcs, listSids, rfs, flows = p.mades, p.listSrcs, p.listSids, p.rfs, p.flows
  if anyCompleted or anyFailed then checkMetrics(k, now, anyCompleted, anyFailed) end
  local marks = startedMarks(k, a.started)
  -- the XACK that opens the write phase raises on a stream of another type before any write
  if #acks > 0 then rawset(k, STREAM_TYPES, true) end
  lists = checkFetch(k, a.fetchCount, m, lists)
  claimTerms(k, a.lockMs, a.maxStalledCount, m)
  -- write phase
  -- (the newest entry pending before the XACK, for dropAcked; a read: an error is left to the
  -- XACK and dropAcked, as without it)
  local pending = #acks > 1 and redis.pcall('XPENDING', k.stream, GROUP)
  local acked = #acks > 0 and redis.call('XACK', k.stream, GROUP, unpack(acks))
  local nCompleted, msCompleted, nFailed, msFailed = 0, 0, 0, 0
  local removed, relay
  local settled = flows and {} -- the completions' settlements, written together (FLOW.flushSettled)
  local lifetime = metricsKeys(k).lifetime -- (the lifetime histogram's tally, lua/metrics-buckets.lua)
  local bounds, cBuckets, fBuckets = lifetime.BOUNDS, nil, nil
  -- the keys of completed jobs removed at once, deleted together after the loop: only jobs
  -- without flow children go there (lua/outcomes.lua settle), and a settlement reads and writes
  -- only parents (jobs with children) and their parents, so none reads a job before its DEL
  local doomed = {}
  for i = 1, #jobs do
    local j = jobs[i]
    local jk = j and j.jk
    if jk then
      local status = statuses[i]
      local src = listSrcs and listSrcs[i] or 's'
      local marks = applyFinish(k, j, status, jk, src, listSids and listSids[i], mades and mades[i], now, announce, listen,
        rfs and rfs[i], doomed)
      if marks then
        removed = removed or {}
        removed[#removed + 1], removed[#removed + 2] = j.jobId, marks
      end
      local parents = flows and j.parents
      if parents and FLOW.settleParents(k, jk, parents, j.flowKind, j.value, now, 0, settled) then relay = true end
      local b = 1
      while j.durationMs > bounds[b] do b = b + 1 end
      if status == 'completed' then
        nCompleted, msCompleted = nCompleted + 1, msCompleted + j.durationMs
        cBuckets = cBuckets or {}
        cBuckets[b] = (cBuckets[b] or 0) + 1
      else
        nFailed, msFailed = nFailed + 1, msFailed + j.durationMs
        fBuckets = fBuckets or {}
        fBuckets[b] = (fBuckets[b] or 0) + 1
      end
    end
  end
  if settled then FLOW.flushSettled(settled, now) end
  -- (in parts: unpack passes at most a few thousand values)
  for from = 1, #doomed, 1000 do
    redis.call('DEL', unpack(doomed, from, math.min(from + 999, #doomed)))
  end
  if acked then dropAcked(k, acks, acked, pending and pending[3]) end
  if removed then recordRemoved(k, consumer, now, removed) end
  if nCompleted > 0 then recordMetrics(k, now, true, msCompleted, nCompleted) end
  if nFailed > 0 then recordMetrics(k, now, false, msFailed, nFailed) end
  if cBuckets or fBuckets then lifetime.flush(k, cBuckets, fBuckets, msCompleted, msFailed) end
  for _, jk in ipairs(marks) do redis.call('HDEL', jk, 'ns') end
  local nextJobs, drained = fetchNext(k, consumer, now, a.fetchCount, m, lists, a.ahead)
  if drained then emit(k, 'drained', '') end
  local n = #statuses
  for i = 1, #nextJobs do statuses[n + i] = nextJobs[i] end
  if relay or (anyFailed and FAILURE_TYPES.dead.wroteRecord(k)) then statuses[#statuses + 1] = FLOW.RELAY_MARK end
  return statuses
end)
end
