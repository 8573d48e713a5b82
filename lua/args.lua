--[[ args.lua — the one way a function reads its ARGV (no registered functions here).
  Why: a function that writes and then meets a bad argument leaves a half-done change (a job in
  no structure at all, out of reach of reclaim, heal and promote). So every function describes its
  ARGV as a schema and decodes all of it, checked, into named tables before its first write:
    local a, jobs = decodeArgs('glidemq_finishMany', args, FINISH_MANY_HEAD, FINISH_MANY_JOB, 'count')
  A schema is a flat list of name, kind pairs; a kind checks one string and returns its value (a
  number, a boolean, the string). The first bad argument raises `ERR_INVALID <function>: <name>
  must be <what>, got "<value>"` and the call ends before any write (helpers.lua `register` turns
  the raised error into the reply). No offsets like args[o + 9]: loops read the named tables.
  The header of each function file lists the same names one per line; test/unit/lua-contract
  checks that they agree.
]]

local MAX_SAFE_INT = 9007199254740991 -- 2^53 - 1: larger numbers lose precision in Lua and in JSON
local MAX_ID_LEN = 256 -- bytes of a job id, consumer or scheduler name
local MAX_COUNT = 10000 -- jobs or entries one call may name

local function showArg(v)
  if v == nil then return 'nothing' end
  if #v > 40 then v = string.sub(v, 1, 40) .. '...' end
  return '"' .. string.gsub(v, '%c', '?') .. '"'
end

-- Raises a coded refusal; error level 0 adds no position, so the reply is exactly the message.
local function refuse(code, msg)
  error(code .. ' ' .. msg, 0)
end

-- Whether the decimal digits `s` fit an unsigned 64-bit number (each part of a stream entry id).
local function fitsUint64(s)
  return #s < 20 or (#s == 20 and s <= '18446744073709551615')
end

local function kind(expect, check)
  return { expect = expect, check = check }
end

-- A finite whole number within [min, max]. (tonumber accepts 'nan' and 'inf': both fail here.)
-- (The expectation is built when a refusal needs it: string.format is not available while the
-- library loads, and `..` would print 2^53 - 1 as 9.007199254741e+15.)
-- (A small one is read with one table lookup, ARG.smallNumber below: tonumber runs strtod twice,
-- and a finish reads several numbers per job, most of them small.)
local ARG -- (filled below; intKind's checks read ARG.smallNumber)
local function intKind(min, max)
  local function expect()
    return 'a whole number from ' .. string.format('%.0f', min) .. ' to ' .. string.format('%.0f', max)
  end
  return kind(expect, function(v)
    local n = ARG.smallNumber[v] or tonumber(v)
    if n and n >= min and n <= max and n % 1 == 0 then return n end
    return nil
  end)
end

ARG = {
  any = kind('a string', function(v) return v end),
  nonEmpty = kind('a non-empty string of at most ' .. MAX_ID_LEN .. ' bytes', function(v)
    if v ~= '' and #v <= MAX_ID_LEN then return v end
    return nil
  end),
  -- A job id as add.lua makes and accepts them: no ':', braces, whitespace or control characters
  -- (they would break key names, hash tags and the job:<id>:logs sub-keys).
  -- (Whitespace other than ' ' is all control characters. The anchored pattern matches the whole
  -- id in one pass; an unanchored search for a bad character costs twice as much, and every job
  -- id a call names is checked.)
  jobId = kind('a job id (1 to ' .. MAX_ID_LEN .. ' bytes, no ":", "{", "}", whitespace or control characters)', function(v)
    if v ~= '' and #v <= MAX_ID_LEN and string.find(v, '^[^%c :{}]*$') then return v end
    return nil
  end),
  flag = kind("'0' or '1'", function(v)
    if v == '1' then return true end
    if v == '0' then return false end
    return nil
  end),
  -- A stream entry id as XADD makes them: <ms>-<seq>, each part an unsigned 64-bit number (a
  -- larger part makes XACK, XRANGE or XCLAIM fail, after the call may have written).
  streamId = kind('a stream entry id (<ms>-<seq>)', function(v)
    local ms, seq = string.match(v, '^(%d+)%-(%d+)$')
    if ms and fitsUint64(ms) and fitsUint64(seq) then return v end
    return nil
  end),
  ms = intKind(0, MAX_SAFE_INT), -- a duration or an absolute time in ms
  count = intKind(0, MAX_COUNT),
  fence = intKind(0, MAX_SAFE_INT),
  int = intKind,
  -- (Called at load time, where FUNCTION LOAD gives no globals: no ipairs or table.concat here.)
  oneOf = function(...)
    local set, vals, names = {}, { ... }, ''
    for i = 1, #vals do
      set[vals[i]] = true
      names = names .. (i > 1 and ', ' or '') .. vals[i]
    end
    return kind('one of ' .. names, function(v)
      if set[v] then return v end
      return nil
    end)
  end,
  -- A JSON text whose top level is an object (decoded only to be checked; the text is returned).
  jsonObject = kind('a JSON object', function(v)
    local ok, t = pcall(cjson.decode, v)
    if ok and type(t) == 'table' and string.find(v, '^%s*{') then return v end -- (an array decodes to a table too)
    return nil
  end),
}

-- The numbers -1 to 1023 by their text ('12' -> 12: what tonumber gives, without its two strtod),
-- and their text by the number (12 -> '12': what tostring gives, without its sprintf).
ARG.smallNumber, ARG.smallText = {}, {}
for n = -1, 1023 do
  ARG.smallText[n] = '' .. n
  ARG.smallNumber[ARG.smallText[n]] = n
end

-- '' (nothing given: the value is '') or a value of kind `k`.
ARG.orEmpty = function(k)
  -- built on refusal, like intKind's (`type` is not available while the library loads)
  local function expect()
    local inner = k.expect
    if type(inner) == 'function' then inner = inner() end
    return "'' or " .. inner
  end
  return kind(expect, function(v)
    if v == '' then return v end
    return k.check(v)
  end)
end

-- Stream entry ids joined by ',' ('' for none), decoded into a list (at most MAX_COUNT).
ARG.streamIds = kind('stream entry ids (<ms>-<seq>) joined by ",", or \'\'', function(v)
  local ids = {}
  if v == '' then return ids end
  for id in string.gmatch(v .. ',', '([^,]*),') do
    if #ids >= MAX_COUNT or not ARG.streamId.check(id) then return nil end
    ids[#ids + 1] = id
  end
  return ids
end)

-- Reads `schema` from args[at...] into a named table; `what` names the group in errors ('' for
-- the head, or the group's number). A schema decoded once per job may give, as its field `read`,
-- a function that decodes the group at `at` exactly as the loop below does, in one step (a loop
-- over the schema costs a call per argument, and a table filled from empty regrows at its 1st,
-- 2nd, 3rd, 5th and 9th field), returning nil for a bad argument: the loop then names it.
local function readGroup(fn, args, at, schema, what)
  local read = schema.read
  if read then
    local out = read(args, at)
    if out then return out, at + #schema / 2 end
  end
  local out = {}
  for i = 1, #schema, 2 do
    local name, k = schema[i], schema[i + 1]
    local raw = args[at]
    local v = nil -- (not `raw and k.check(raw) or nil`: a flag's false would become nil)
    if raw ~= nil then v = k.check(raw) end
    if v == nil then
      local expect = k.expect
      if type(expect) == 'function' then expect = expect() end
      if type(what) == 'number' then what = 'group ' .. what .. ' argument ' end -- built only here (hot path)
      refuse('ERR_INVALID', fn .. ': ' .. what .. name .. ' must be ' .. expect .. ', got ' .. showArg(raw))
    end
    out[name] = v
    at = at + 1
  end
  return out, at
end

--[[ Decodes all of ARGV. `head` is the schema of the leading arguments; `each` (optional) the
  schema of a repeated group that follows them, and `countName` the head argument that says how
  many groups there are (nil: the groups run to the end of ARGV, and must fill it exactly).
  Returns the head table and a list of group tables. Raises ERR_INVALID on any bad argument, on a
  count that does not match the arguments sent, and on arguments left over. With `isolate`, a
  group with a bad argument does not raise: its place in the list is false, and a third value
  maps its number to its coded error reply (nil when every group is good). ]]
local function decodeArgs(fn, args, head, each, countName, isolate)
  local h, at = readGroup(fn, args, 1, head, '')
  local groups = {}
  local n = #args - at + 1
  if each then
    local width = #each / 2
    local count = countName and h[countName] or math.floor(n / width)
    if n ~= count * width then
      refuse('ERR_INVALID', fn .. ': ' .. (countName and (countName .. ' is ' .. count .. ', so ') or '') ..
        'expected ' .. (at - 1) .. ' arguments then groups of ' .. width .. ', got ' .. #args .. ' arguments in all')
    end
    if isolate then
      local refused = nil
      for i = 1, count do
        local ok, g = pcall(readGroup, fn, args, at, each, i)
        if ok then
          groups[i] = g
        else
          groups[i] = false
          refused = refused or {}
          refused[i] = redis.error_reply(g)
        end
        at = at + width
      end
      return h, groups, refused
    end
    for i = 1, count do
      groups[i], at = readGroup(fn, args, at, each, i)
    end
  elseif n ~= 0 then
    refuse('ERR_INVALID', fn .. ': expected ' .. (at - 1) .. ' arguments, got ' .. #args)
  end
  return h, groups
end

