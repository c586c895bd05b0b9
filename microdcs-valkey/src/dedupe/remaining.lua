-- microdcs dedupe time left
-- KEYS[1] dedupe key of the event
-- Returns false for no key, else {value held, its PTTL}, which the caller
-- checks (a value that is neither `done` nor a claim, or no expiry, is
-- damage); WRONGTYPE for a key of another type (PTTL alone would answer
-- for any type).
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return false end
if kind ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
