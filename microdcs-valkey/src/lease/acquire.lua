-- microdcs lease acquire
-- KEYS[1] lease record (hash: id, owner, token; its TTL is the lease)
-- KEYS[2] fencing counter (never expires)
-- KEYS[3] request cache of this request id
-- ARGV[1] owner
-- ARGV[2] ttl in ms
-- ARGV[3] request fingerprint
-- ARGV[4] new lease id
-- ARGV[5] request cache ttl in ms
-- Returns {status, a, b, c}:
--   {'acquired', lease id, token, ttl ms}  taken, with a new fencing token; the TTL the server holds
--   {'held', owner, remaining ms, ''}      someone holds it
--   {'corrupt', reason, '', ''}            corrupt record or counter; nothing changed
--   {'wrongtype', key role, '', ''}        'record', 'fence' or 'request' has another type; nothing changed
--   {'conflict', '', '', ''}               the request id was used with other arguments
-- A repeated request id with the same fingerprint returns the cached result
-- (a damaged cached result is 'corrupt', never replayed); a lease it took is
-- answered with the time it has left now: none once it has ended (its first
-- answer lost, the request sent again later), or 'held' when another holds
-- it since, so a late answer never promises a lifetime that is over.
if not type_ok(KEYS[3], 'hash') then return {'wrongtype', 'request', '', ''} end
local cached = redis.call('HMGET', KEYS[3], 'fp', 'r1', 'r2', 'r3', 'r4')
if cached[1] then
  if cached[1] ~= ARGV[3] then return {'conflict', '', '', ''} end
  if not cached_ok(cached, {acquired = {4, 5}, held = {4}}) then return {'corrupt', CACHED_DAMAGED, '', ''} end
  if cached[2] ~= 'acquired' then return {cached[2], cached[3], cached[4], cached[5]} end
  if not type_ok(KEYS[1], 'hash') then return {'wrongtype', 'record', '', ''} end
  local now = redis.call('HMGET', KEYS[1], 'id', 'owner', 'token')
  local left = redis.call('PTTL', KEYS[1])
  if left >= 0 and now[1] == cached[3] and now[3] == cached[4] then
    return {'acquired', cached[3], cached[4], tostring(left)}
  end
  if left >= 0 and now[2] then return {'held', now[2], tostring(left), ''} end
  return {'acquired', cached[3], cached[4], '0'}
end
if not type_ok(KEYS[1], 'hash') then return {'wrongtype', 'record', '', ''} end
if not type_ok(KEYS[2], 'string') then return {'wrongtype', 'fence', '', ''} end
local rec = redis.call('HMGET', KEYS[1], 'id', 'owner', 'token')
local pttl = redis.call('PTTL', KEYS[1])
local f = redis.call('GET', KEYS[2])
local bad = nil
if pttl == -1 then bad = 'the lease record has no TTL'
elseif pttl >= 0 and (not rec[1] or not rec[2] or not canonical(rec[3])) then bad = 'the lease record is malformed'
elseif f and not canonical(f) then bad = 'the fence counter is not a whole number from 0 to 2^53-1'
elseif pttl < 0 and f == MAX_COUNTER then bad = 'the fence counter is at 2^53-1: no further token can be issued' end
if bad then return {'corrupt', bad, '', ''} end
local result
if pttl >= 0 then
  result = {'held', rec[2], tostring(pttl), ''}
else
  redis.call('INCR', KEYS[2])
  -- The counter's own text: exact, where a Lua number would be a double.
  local token = redis.call('GET', KEYS[2])
  redis.call('HSET', KEYS[1], 'id', ARGV[4], 'owner', ARGV[1], 'token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  -- The whole milliseconds just set, not a PTTL read back: servers whose
  -- scripts do not freeze the clock (Redis 7.0) may already answer one less.
  result = {'acquired', ARGV[4], token, ARGV[2]}
end
redis.call('HSET', KEYS[3], 'fp', ARGV[3], 'r1', result[1], 'r2', result[2], 'r3', result[3], 'r4', result[4])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return result
