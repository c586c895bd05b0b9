-- KEYS[1] stream. ARGV[1] group.
-- Returns {made, removed}: 1 if this call made the group (0 if it existed),
-- and the number of entries removed from the stream so far (for a group
-- made now, those removed before it existed).
-- The group starts at 0-0 (everything the stream keeps) with ENTRIESREAD at
-- the number of entries removed so far (entries-added minus length): those
-- went before the group existed and are no loss of its own.
local removed = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local added, length = 0, 0
  for i = 1, #info, 2 do
    if info[i] == 'entries-added' then added = info[i + 1] end
    if info[i] == 'length' then length = info[i + 1] end
  end
  removed = added - length
end
local made = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM', 'ENTRIESREAD', removed)
if type(made) == 'table' and made.err then
  -- The group exists: known by the error's code, its first word.
  if string.match(made.err, '^BUSYGROUP') then return {0, removed} end
  return made
end
return {1, removed}
