-- KEYS[1] stream. ARGV[1] group, ARGV[2] consumer, ARGV[3] count,
-- ARGV[4] the group's last-delivered id when a gap was reported and the
-- consumer told ('' for none), ARGV[5] the entries removed that gap's report
-- counted ('' when it could not count them).
-- Returns {gap, entries}:
--   gap {} and entries the XREADGROUP reply (nil when nothing is new); or
--   gap {last_had, first_gets ('' when the stream is empty), lost ('' when
--   unknown), removed ('' when unknown)} and entries {}: nothing is read
--   past a gap the consumer has not been told of.
-- Errors: NOGROUP (from XREADGROUP) for a missing stream or group; WRONGTYPE.
-- Counting: trims remove entries from the head, so of the entries ever added
-- (entries-added) the first `removed` = entries-added - length are gone; a
-- group whose read counter (entries-read) is below that lost the difference.
-- The counter is exact when no entry was deleted from the middle
-- (max-deleted-entry-id 0-0, or below the first entry kept); otherwise the
-- gap is reported when the group stands before the first entry kept, with
-- its size unknown.
local function read()
  return {{}, redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return read() end
local function id_lt(a, b)
  local ams, aseq = parse(a)
  local bms, bseq = parse(b)
  if ams == nil or bms == nil then return false end
  if ams ~= bms then return num_lt(ams, bms) end
  return num_lt(aseq, bseq)
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local added, length, maxdel, first = 0, 0, '0-0', '0-0'
for i = 1, #info, 2 do
  local k, v = info[i], info[i + 1]
  if k == 'entries-added' then added = v end
  if k == 'length' then length = v end
  if k == 'max-deleted-entry-id' then maxdel = v end
  if k == 'first-entry' and type(v) == 'table' then first = v[1] end
end
local last, entries_read = nil, false
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, l, r = nil, nil, false
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] end
    if g[i] == 'last-delivered-id' then l = g[i + 1] end
    if g[i] == 'entries-read' then r = g[i + 1] end
  end
  if name == ARGV[1] then last, entries_read = l, r end
end
-- No such group: XREADGROUP's own NOGROUP error.
if last == nil then return read() end
local removed = added - length
local exact = type(entries_read) == 'number' and (maxdel == '0-0' or (length > 0 and id_lt(maxdel, first)))
if ARGV[4] ~= '' and ARGV[4] == last then
  -- The consumer was told of the gap after `last`: its counter moves past
  -- the entries that gap counted, and what was removed since is a new gap.
  if ARGV[5] ~= '' and exact and entries_read < tonumber(ARGV[5]) then
    redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], last, 'ENTRIESREAD', ARGV[5])
    entries_read = tonumber(ARGV[5])
  elseif not exact then
    return read()
  end
end
local before_first = length == 0 or id_lt(last, first)
local function first_gets()
  if length == 0 then return '' end
  return first
end
if exact then
  if removed > entries_read then
    return {{last, first_gets(), tostring(removed - entries_read), tostring(removed)}, {}}
  end
elseif last ~= '0-0' and before_first then
  return {{last, first_gets(), '', ''}, {}}
end
return read()
