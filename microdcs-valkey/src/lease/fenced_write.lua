-- microdcs fenced write
-- KEYS[1] fencing counter
-- KEYS[2] protected data
-- ARGV[1] token
-- ARGV[2] value
-- Returns:
--   {'written', ''}           written: no newer token was issued
--   {'fenced', highest}       a newer token was issued; nothing written
--   {'corrupt', counter}      the counter is not a number; nothing written
local f = redis.call('GET', KEYS[1]) or '0'
if not string.find(f, '^%d+$') then return {'corrupt', f} end
if tonumber(ARGV[1]) < tonumber(f) then return {'fenced', f} end
redis.call('SET', KEYS[2], ARGV[2])
return {'written', ''}
