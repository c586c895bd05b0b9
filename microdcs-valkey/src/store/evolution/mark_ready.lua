-- microdcs index ready: records a building index as ready, only while its
-- state is still the one the backfill built (a newer schema may have
-- recorded another layout meanwhile).
-- KEYS[1] index states of the kind (hash `schema:indexes:{#kind}`)
-- ARGV[1] the index name; ARGV[2] `<schema>:<fingerprint>` built
-- Returns 1 if marked ready, 0 if the state is another.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'building:' .. ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], 'ready:' .. ARGV[2])
return 1
