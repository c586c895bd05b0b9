-- microdcs dedupe claim
-- KEYS[1] dedupe key of the event
-- KEYS[2] (during an upgrade only) the event's key in the format before
--         length-prefixed digests: read, never written
-- ARGV[1] 'processing:' .. token
-- ARGV[2] claim lease in ms
-- Returns {value held, its PTTL, which}: which = 2 when the old-format key
-- holds the event (it answers, and nothing is written), else 1 with
-- ARGV[1] when the SET succeeded (ours), or what another holder set
-- ('processing:' .. their token, or 'done'), which the caller checks (the
-- TTL too: a claim without one would be busy forever). {type, 0, 3}: the
-- old-format key holds another type (left as it is). nil only if the key
-- expired between the two commands, which a script rules out. A key of
-- another type fails GET with WRONGTYPE; SET NX writes nothing to an
-- existing key, so a damaged key is left as it was.
if KEYS[2] then
  local kind = redis.call('TYPE', KEYS[2])['ok']
  if kind == 'string' then return {redis.call('GET', KEYS[2]), redis.call('PTTL', KEYS[2]), 2} end
  if kind ~= 'none' then return {kind, 0, 3} end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {ARGV[1], tonumber(ARGV[2]), 1} end
local held = redis.call('GET', KEYS[1])
if not held then return false end
return {held, redis.call('PTTL', KEYS[1]), 1}
