-- microdcs dedupe claim
-- KEYS[1] dedupe key of the event
-- ARGV[1] 'processing:' .. token
-- ARGV[2] claim lease in ms
-- Returns {value now held, its PTTL}: ARGV[1] when the SET succeeded (ours),
-- else what another holder set ('processing:' .. their token, or 'done'),
-- which the caller checks (the TTL too: a claim without one would be busy
-- forever). nil only if the key expired between the two commands, which a
-- script rules out. A key of another type fails GET with WRONGTYPE; SET NX
-- writes nothing to an existing key, so a damaged key is left as it was.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {ARGV[1], tonumber(ARGV[2])} end
local held = redis.call('GET', KEYS[1])
if not held then return false end
return {held, redis.call('PTTL', KEYS[1])}
