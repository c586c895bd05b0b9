-- KEYS[1] stream. ARGV[1] group.
-- Returns the number of entries removed from the stream before the group
-- was made; BUSYGROUP (the server's error) when the group exists.
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
redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM', 'ENTRIESREAD', removed)
return removed
