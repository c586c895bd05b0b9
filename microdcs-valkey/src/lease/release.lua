-- microdcs lease release (compare and delete)
-- KEYS[1] lease record (hash: id, owner, token; its TTL is the lease)
-- KEYS[2] request cache of this request id
-- ARGV[1] lease id
-- ARGV[2] owner
-- ARGV[3] token
-- ARGV[4] request fingerprint
-- ARGV[5] request cache ttl in ms
-- Returns {status, a, b, c}:
--   {'released', '', '', ''}                deleted: it was this grant
--   {'released', reason, '', ''}            deleted a corrupt record (reason says what was wrong) so the
--                                           lease can be taken again
--   {'notheld', '', '', ''}                 expired or another grant; nothing deleted
--   {'wrongtype', 'request', '', ''}        the request cache has another type; nothing deleted
--   {'conflict', '', '', ''}                the request id was used with other arguments
--   {'corrupt', reason, '', ''}             the cached result of this request id is damaged; nothing deleted
-- A repeated request id with the same fingerprint returns the cached result
-- (a damaged cached result is 'corrupt', never replayed).
if not type_ok(KEYS[2], 'hash') then return {'wrongtype', 'request', '', ''} end
local cached = redis.call('HMGET', KEYS[2], 'fp', 'r1', 'r2', 'r3', 'r4')
if cached[1] then
  if cached[1] ~= ARGV[4] then return {'conflict', '', '', ''} end
  if not cached_ok(cached, {released = {}, notheld = {}}) then return {'corrupt', CACHED_DAMAGED, '', ''} end
  return {cached[2], cached[3], cached[4], cached[5]}
end
local bad = nil
local rec, pttl = {}, -2
if not type_ok(KEYS[1], 'hash') then
  bad = 'the lease record is not a hash'
else
  rec = redis.call('HMGET', KEYS[1], 'id', 'owner', 'token')
  pttl = redis.call('PTTL', KEYS[1])
  if pttl == -1 then bad = 'the lease record has no TTL'
  elseif pttl >= 0 and (not rec[1] or not rec[2] or not canonical(rec[3])) then bad = 'the lease record is malformed' end
end
local result
if bad then
  redis.call('DEL', KEYS[1])
  result = {'released', bad, '', ''}
elseif pttl >= 0 and rec[1] == ARGV[1] and rec[2] == ARGV[2] and rec[3] == ARGV[3] then
  redis.call('DEL', KEYS[1])
  result = {'released', '', '', ''}
else
  result = {'notheld', '', '', ''}
end
redis.call('HSET', KEYS[2], 'fp', ARGV[4], 'r1', result[1], 'r2', result[2], 'r3', result[3], 'r4', result[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return result
