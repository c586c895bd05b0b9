-- microdcs writer announcement: one heartbeat of a store that writes.
-- KEYS[1] live writers of the kind (sorted set `schema:writers:{#kind}`):
--         `<schema>:<writer id>` scored by the server time (ms) it expires at
-- KEYS[2] index states of the kind (hash `schema:indexes:{#kind}`)
-- ARGV[1] this writer's member, `<schema>:<writer id>`
-- ARGV[2] how long the entry lasts, in milliseconds (`WriterLifetime`)
-- ARGV[3] this writer's schema version
-- ARGV[4..] pairs: an index name and its layout fingerprint
-- Returns the server time in milliseconds.
--
-- Expired entries are removed first, so the set holds live writers only.
-- Index states: schema 1 (the first release) records each index it knows
-- as ready (its writes kept it from the start); a later schema records an
-- index it does not find, or finds recorded by an older schema with
-- another fingerprint (changed), as building; a state recorded by the
-- same or a newer schema, or an unchanged index, is left as it is.
-- And the other way: an index a newer schema recorded ready that this
-- writer does not keep (it does not know it, or knows another layout) goes
-- back to building under the newer schema's own record, so its next
-- backfill can make it ready again: this writer's creates and updates will
-- not reach it, and a query must not answer from it meanwhile. (An index
-- an older schema recorded that this writer dropped is left to the older
-- release, which still reads it while it runs.)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local schema = tonumber(ARGV[3])
-- Announcements per schema, so a backfill can tell that a writer of an
-- older schema announced during its pass, even one whose entry lapsed
-- before the pass ended (see mark_ready.lua).
redis.call('HINCRBY', KEYS[2], '@announced:' .. schema, 1)
local keeps = {}
for i = 4, #ARGV - 1, 2 do
  keeps[ARGV[i]] = ARGV[i + 1]
end
for i = 4, #ARGV - 1, 2 do
  local name, fp = ARGV[i], ARGV[i + 1]
  local cur = redis.call('HGET', KEYS[2], name)
  if not cur then
    if schema == 1 then
      redis.call('HSET', KEYS[2], name, 'ready:1:' .. fp)
    else
      redis.call('HSET', KEYS[2], name, 'building:' .. schema .. ':' .. fp)
    end
  else
    local _, s, f = string.match(cur, '^(%a+):(%d+):(.*)$')
    if not s or (tonumber(s) < schema and f ~= fp) then
      redis.call('HSET', KEYS[2], name, 'building:' .. schema .. ':' .. fp)
    end
  end
end
local states = redis.call('HGETALL', KEYS[2])
for i = 1, #states - 1, 2 do
  local s, f = string.match(states[i + 1], '^ready:(%d+):(.*)$')
  if s and tonumber(s) > schema and keeps[states[i]] ~= f then
    redis.call('HSET', KEYS[2], states[i], 'building:' .. s .. ':' .. f)
  end
end
return now
