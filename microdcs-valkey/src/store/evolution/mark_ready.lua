-- microdcs index ready: records a building index as ready, only while its
-- state is still building the layout the backfill built (a newer schema
-- may have recorded another layout meanwhile). The schema recorded with
-- the state stays: which release recorded the layout is what an older
-- writer's announcement compares, not which release finished the
-- backfill (a later release that keeps the same layout finishes it too).
-- KEYS[1] index states of the kind (hash `schema:indexes:{#kind}`)
-- ARGV[1] the index name; ARGV[2] the layout fingerprint built
-- Returns 1 if marked ready, 0 if the state is another.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
local s, f = string.match(cur, '^building:(%d+):(.*)$')
if not s or f ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], 'ready:' .. s .. ':' .. f)
return 1
