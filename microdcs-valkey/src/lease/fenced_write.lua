-- microdcs fenced write
-- KEYS[1] fencing counter
-- KEYS[2] protected data
-- ARGV[1] token (canonical text)
-- ARGV[2] value
-- Returns:
--   {'written', ''}           written: the token is the latest issued
--   {'fenced', highest}       a newer token was issued; nothing written
--   {'unissued', highest}     the token was never issued (0, or above the
--                             latest); nothing written
--   {'corrupt', ''}           the counter is not canonical; nothing written
--   {'badtoken', ''}          the token is not canonical; nothing written
--   {'wrongtype', key role}   'fence' or 'data' has another type; nothing written
-- Running it again is safe: the same value under the same check.
if not type_ok(KEYS[1], 'string') then return {'wrongtype', 'fence'} end
if not type_ok(KEYS[2], 'string') then return {'wrongtype', 'data'} end
local f = redis.call('GET', KEYS[1]) or '0'
if not canonical(f) then return {'corrupt', ''} end
if not canonical(ARGV[1]) then return {'badtoken', ''} end
if less(ARGV[1], f) then return {'fenced', f} end
if ARGV[1] ~= f or f == '0' then return {'unissued', f} end
redis.call('SET', KEYS[2], ARGV[2])
return {'written', ''}
