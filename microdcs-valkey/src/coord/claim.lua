-- microdcs dedupe claim
-- KEYS[1] dedupe key of the event
-- ARGV[1] 'processing:' .. token
-- ARGV[2] claim lease in ms
-- Returns the value now held: ARGV[1] when the SET succeeded (ours), else
-- what another holder set ('processing:' .. their token, or 'done'); nil
-- only if the key expired between the two commands, which a script rules out.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return ARGV[1] end
return redis.call('GET', KEYS[1])
