-- microdcs dedupe mark done
-- KEYS[1] dedupe key of the event
-- ARGV[1] retention in ms
-- A plain SET would replace a key of another type without a word; refuse
-- it with the server's own WRONGTYPE instead.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('SET', KEYS[1], 'done', 'PX', ARGV[1])
