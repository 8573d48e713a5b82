--[[ release.lua — glidemq_release: gives back claims a worker holds but will not run (prefetched
  jobs at close). Each owned claim is released and the job re-queued where its options say.
  KEYS[1] meta key.  ARGV: consumer, then pairs (jobId, fence).
  Returns the number of jobs given back (claims this consumer no longer owns are left alone).
  Errors: none.
]]
redis.register_function('glidemq_release', function(keys, args)
  local k = keysFor(keys[1])
  local consumer = args[1]
  local released = 0
  for i = 2, #args, 2 do
    local id, fence = args[i], args[i + 1]
    local jk = jobKey(k, id)
    local f = redis.call('HMGET', jk, 'state', 'fence', 'owner')
    if f[1] == 'active' and f[2] == fence and f[3] == consumer then
      releaseActive(k, id, jk)
      requeue(k, id, jk)
      released = released + 1
    end
  end
  return released
end)
