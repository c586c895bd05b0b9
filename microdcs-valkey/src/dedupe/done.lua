-- microdcs dedupe mark done
-- KEYS[1] dedupe key of the event
-- ARGV[1] retention in ms
-- Returns false when `done` was written, else {value held, its PTTL}: a
-- value that is neither `done` nor a claim with an expiry, which the
-- caller reports as damage (nothing written). A plain SET would replace a
-- key of another type without a word; refuse it with the server's own
-- WRONGTYPE instead.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if kind == 'string' then
  local held = redis.call('GET', KEYS[1])
  local pttl = redis.call('PTTL', KEYS[1])
  local claim = string.sub(held, 1, 11) == 'processing:' and #held > 11 and pttl >= 0
  if held ~= 'done' and not claim then return {held, pttl} end
end
redis.call('SET', KEYS[1], 'done', 'PX', ARGV[1])
return false
