-- microdcs dedupe time left
-- KEYS[1] dedupe key of the event
-- Returns the PTTL; WRONGTYPE for a key of another type (PTTL alone would
-- answer for any type).
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('PTTL', KEYS[1])
