-- microdcs start lease
-- KEYS[1] start lease key of the configuration
-- ARGV[1] lifetime in ms
-- Returns 1 when taken, 0 when held by someone else, -1 when held without
-- an expiry (it would never be free again). A key of another type would
-- make SET NX fail forever as "held": WRONGTYPE instead.
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 1 end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if redis.call('PTTL', KEYS[1]) == -1 then return -1 end
return 0
