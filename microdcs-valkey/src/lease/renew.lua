-- microdcs lease renew
-- KEYS[1] lease record (hash: id, owner, token; its TTL is the lease)
-- KEYS[2] request cache of this request id
-- ARGV[1] lease id
-- ARGV[2] owner
-- ARGV[3] token
-- ARGV[4] ttl in ms
-- ARGV[5] request fingerprint
-- ARGV[6] request cache ttl in ms
-- Returns {status, a, b, c}:
--   {'renewed', ttl ms, '', ''}      still held by this grant; ttl ms is the TTL the server now holds
--   {'lost', '', '', ''}             expired or another grant; an expired lease is not revived
--   {'corrupt', reason, '', ''}      corrupt record; nothing changed
--   {'wrongtype', key role, '', ''}  'record' or 'request' has another type; nothing changed
--   {'conflict', '', '', ''}         the request id was used with other arguments
-- A repeated request id with the same fingerprint returns the cached result
-- (a damaged cached result is 'corrupt', never replayed); a renewal is
-- answered as the lease is now: one that ended since the first answer (lost
-- on its way, the request sent again later) is 'lost', never renewed again.
if not type_ok(KEYS[2], 'hash') then return {'wrongtype', 'request', '', ''} end
local cached = redis.call('HMGET', KEYS[2], 'fp', 'r1', 'r2', 'r3', 'r4')
if cached[1] then
  if cached[1] ~= ARGV[5] then return {'conflict', '', '', ''} end
  if not cached_ok(cached, {renewed = {3}, lost = {}}) then return {'corrupt', CACHED_DAMAGED, '', ''} end
  if cached[2] ~= 'renewed' then return {cached[2], cached[3], cached[4], cached[5]} end
  if not type_ok(KEYS[1], 'hash') then return {'wrongtype', 'record', '', ''} end
  local now = redis.call('HMGET', KEYS[1], 'id', 'owner', 'token')
  local left = redis.call('PTTL', KEYS[1])
  if left >= 0 and now[1] == ARGV[1] and now[2] == ARGV[2] and now[3] == ARGV[3] then
    return {'renewed', tostring(left), '', ''}
  end
  return {'lost', '', '', ''}
end
if not type_ok(KEYS[1], 'hash') then return {'wrongtype', 'record', '', ''} end
local rec = redis.call('HMGET', KEYS[1], 'id', 'owner', 'token')
local pttl = redis.call('PTTL', KEYS[1])
local bad = nil
if pttl == -1 then bad = 'the lease record has no TTL'
elseif pttl >= 0 and (not rec[1] or not rec[2] or not canonical(rec[3])) then bad = 'the lease record is malformed' end
if bad then return {'corrupt', bad, '', ''} end
local result
if pttl < 0 or rec[1] ~= ARGV[1] or rec[2] ~= ARGV[2] or rec[3] ~= ARGV[3] then
  result = {'lost', '', '', ''}
else
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  -- The whole milliseconds just set (see acquire: PTTL may read one less).
  result = {'renewed', ARGV[4], '', ''}
end
redis.call('HSET', KEYS[2], 'fp', ARGV[5], 'r1', result[1], 'r2', result[2], 'r3', result[3], 'r4', result[4])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return result
