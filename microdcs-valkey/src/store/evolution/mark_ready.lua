-- microdcs index ready: records a building index as ready, only while its
-- state is still building the layout the backfill built (a newer schema
-- may have recorded another layout meanwhile). The schema recorded with
-- the state stays: which release recorded the layout is what an older
-- writer's announcement compares, not which release finished the
-- backfill (a later release that keeps the same layout finishes it too).
-- And only if no writer of a schema older than the backfill's announced
-- since its pass started: such a writer does not keep the index, and one
-- may have written behind the pass and stopped again before its end, or
-- announced between the backfill's last look at the writers and now.
-- KEYS[1] index states of the kind (hash `schema:indexes:{#kind}`)
-- ARGV[1] the index name; ARGV[2] the layout fingerprint built
-- ARGV[3] the backfill's schema; ARGV[4] the announcements of older
-- schemas counted when its pass started
-- ARGV[5] empty for a backfill; for an offline rebuild, which built this
-- layout from the documents as stored with no writer about, its schema:
-- the state, whatever it was, becomes `ready:<ARGV[5]>:<ARGV[2]>`.
-- Returns 1 if marked ready, 0 if the state is another, 2 if a writer
-- counted announced during the pass.
local older = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields - 1, 2 do
  local s = string.match(fields[i], '^@announced:(%d+)$')
  if s and tonumber(s) < tonumber(ARGV[3]) then older = older + tonumber(fields[i + 1]) end
end
if older ~= tonumber(ARGV[4]) then return 2 end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], 'ready:' .. ARGV[5] .. ':' .. ARGV[2])
  return 1
end
local cur = redis.call('HMGET', KEYS[1], ARGV[1])[1]
if not cur then return 0 end
local s, f = string.match(cur, '^building:(%d+):(.*)$')
if not s or f ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], 'ready:' .. s .. ':' .. f)
return 1
