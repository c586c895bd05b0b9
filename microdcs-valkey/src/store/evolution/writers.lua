-- microdcs live writers: the entries of a kind's writers not yet expired.
-- KEYS[1] live writers of the kind (sorted set `schema:writers:{#kind}`)
-- Returns the members whose expiry is after the server's time now.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGE', KEYS[1], '(' .. now, '+inf', 'BYSCORE')
