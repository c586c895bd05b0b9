-- microdcs write script for `JobOrder` (kind `joborder`). Generated; do not edit.
-- KEYS[1] document hash `joborder:{id}`
-- KEYS[2] change stream `changes:{scope}` (XADD MAXLEN ~)
-- KEYS[3] scope registry `scopes` (set)
-- KEYS[4] list `joborder:list:{scope}` (sorted set)
-- KEYS[5] tombstone `tomb:{kind}:{id}`, read when the document is missing
-- ARGV[1] expected version: `create`, `any`, the version number, or `<version>:<op id>` (a revision: the version and the id of the write that produced it)
-- ARGV[2] operation id, exactly 12 characters (kept in the `ops` history)
-- ARGV[3] document id
-- ARGV[4] scope
-- ARGV[5] document text, stored as is in `doc`
-- ARGV[6] kind (change entries)
-- ARGV[7] nudge channel (PUBLISH scope)
-- ARGV[8] change stream approximate max length
-- ARGV[9] list score
-- ARGV[10] how many operation ids `ops` keeps (1 to 64)
-- ARGV[11] the number of family effects m and per effect: `incr` n | `hincr` field n | `sadd`/`srem` member | `zadd` member score | `zrem` member, padded to three, and the family's lifetime in ms or ''; effect i acts on KEYS[fixed + i]
-- Returns:
--   {1, version}          written; `version` is the new version
--   {0, current}          the expected version does not match (create of an existing document)
--   {2}                   update of a missing document
--   {3, stored_scope}     the id belongs to another scope; nothing written
--   {4, index, holder}    unique index number `index` (1-based) holds another id; nothing written
--   {5, v, scope, ops, ...} stored index fields differ from the caller's read: what is
--                         stored (`v`, `scope`, `ops`, then every index field) to try again with
--   {6, field}            corrupt hash (`v` not a version, `scope` or `doc` missing)
--   {6, 'v', 'limit'}     the version is at its limit and cannot grow; nothing written
--   {6, 'tomb'}           corrupt tombstone; nothing written
--   {7, version}          this operation id was already applied, producing `version`
--                         (found in the history, or in the tombstone of a deleted document)
--   {9, stored_schema}    a newer schema of the type wrote the document (its stamp `sv`);
--                         nothing written
--   {1, version, values}  a step written now: `values` are what its family effects returned, in order
local doc_key = KEYS[1]
local id = ARGV[3]
local scope = ARGV[4]
local op = ARGV[2]
local cur = redis.call('HMGET', doc_key, 'v', 'scope', 'ops', 'score', 'doc', 'sv')
local vs = cur[1]
local exists = vs ~= false or cur[2] ~= false
local v = 0
if exists then
  -- A version: decimal digits without sign or leading zero, at most 9007199254740991.
  -- Checked as text (bytes, not the locale's collation) before it is
  -- converted, so nothing is rounded before it is known to be exact; only
  -- a text as long as the limit needs the comparison byte by byte.
  if not vs or #vs > 16 or not string.find(vs, '^[1-9][0-9]*$') then return {6, 'v'} end
  if #vs == 16 then
    for i = 1, 16 do
      local a, b = string.byte(vs, i), string.byte('9007199254740991', i)
      if a ~= b then
        if a > b then return {6, 'v'} end
        break
      end
    end
  end
  v = tonumber(vs)
  if cur[2] == false then return {6, 'scope'} end
  if cur[5] == false then return {6, 'doc'} end
  if cur[2] ~= scope then return {3, cur[2]} end
elseif redis.call('EXISTS', doc_key) == 1 then
  return {6, 'v'}
end
local keep = ARGV[10] * 12
local ops = cur[3] or ''
if string.find(ops, '=', 1, true) then ops = '' end
if #ops % 12 ~= 0 or #ops / 12 > v then return {6, 'ops'} end
local at = string.find(ops, op, 1, true)
while at and at % 12 ~= 1 do at = string.find(ops, op, at + 1, true) end
if at then
  redis.call('HSET', doc_key, 'v', vs)
  return {7, v - (#ops - at + 1) / 12 + 1}
end
if not exists then
  local tomb = redis.call('GET', KEYS[5])
  local tomb_v, tomb_op, tomb_ops
  if tomb then
    local tv, rest = string.match(tomb, '^([1-9][0-9]*):(.*)$')
    if not tv or #tv > 16 or tonumber(tv) > 9007199254740991 or #rest < 12 or #rest % 12 ~= 0 then return {6, 'tomb'} end
    tomb_v = tonumber(tv)
    tomb_op = string.sub(rest, 1, 12)
    tomb_ops = string.sub(rest, 13)
    if #tomb_ops / 12 > tomb_v then return {6, 'tomb'} end
  end
  if tomb then
    local at = string.find(tomb_ops, op, 1, true)
    while at and at % 12 ~= 1 do at = string.find(tomb_ops, op, at + 1, true) end
    if at then
      redis.call('SET', KEYS[5], tomb, 'KEEPTTL')
      return {7, tomb_v - (#tomb_ops - at + 1) / 12 + 1}
    end
    v = tomb_v
  end
end
local sv = cur[6]
if exists and sv then
  if #sv > 7 or not string.find(sv, '^[1-9][0-9]*$') then return {6, 'sv'} end
  if tonumber(sv) > 1 then return {9, tonumber(sv)} end
end
local expect = ARGV[1]
if expect == 'create' then
  if exists then return {0, v} end
elseif expect ~= 'any' then
  if not exists then return {2} end
  local want_v, want_op = expect, nil
  local at = string.find(expect, ':', 1, true)
  if at then want_v, want_op = string.sub(expect, 1, at - 1), string.sub(expect, at + 1) end
  if want_v ~= cur[1] or (want_op and string.sub(ops, -12) ~= want_op) then return {0, v} end
end
if v >= 9007199254740991 then return {6, 'v', 'limit'} end
-- validation reads (a wrong type aborts here, before any write)
local list_same = exists and cur[4] == ARGV[9]
if not list_same then redis.call('ZSCORE', KEYS[4], id) end
if not exists then redis.call('SISMEMBER', KEYS[3], scope) end
local function whole(text, max) return text and string.find(text, '^%d+$') and #text <= 4 and tonumber(text) <= max end
local last = 10
local function malformed() return redis.error_reply('ERR microdcs step: malformed effects') end
local function canonical(text) return text == '0' or string.find(text, '^%-?[1-9]%d*$') ~= nil end
local function int64(text)
  if not canonical(text) then return false end
  local digits = string.match(text, '%d+')
  return #digits < 19 or (#digits == 19 and digits <= '9223372036854775807')
end
local function typed(cmd, k, f)
  local r
  if f then r = redis.pcall(cmd, k, f) else r = redis.pcall(cmd, k) end
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 10) == 'WRONGTYPE ' then return nil, {6, 'effect-type', k} end
    return nil, r
  end
  return r
end
local function counted(cur, k)
  if not cur then return nil end
  if not int64(cur) then return {6, 'effect', k} end
  if #cur > 16 then return {6, 'effect-range', k} end
end
local fx_at = last + 1
if not whole(ARGV[fx_at], 64) then return malformed() end
local fx_count = tonumber(ARGV[fx_at])
if fx_at + 4 * fx_count ~= #ARGV or 5 + fx_count ~= #KEYS then return malformed() end
for i = 1, fx_count do
  local at, k = fx_at + 4 * (i - 1), KEYS[5 + i]
  local fx, a, b, ttl = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  if ttl ~= '' and not (string.find(ttl, '^[1-9]%d*$') and #ttl <= 13) then return malformed() end
  local got, bad
  if fx == 'incr' then
    if not (canonical(a) and #a <= 16) then return malformed() end
    got, bad = typed('GET', k)
    bad = bad or counted(got, k)
  elseif fx == 'hincr' then
    if not (canonical(b) and #b <= 16) then return malformed() end
    got, bad = typed('HGET', k, a)
    bad = bad or counted(got, k)
  elseif fx == 'sadd' or fx == 'srem' then
    got, bad = typed('SCARD', k)
  elseif fx == 'zadd' then
    local x = string.find(b, '^%-?%d+%.?%d*$') and tonumber(b)
    if not x or x ~= x or x == math.huge or x == -math.huge then return malformed() end
    got, bad = typed('ZCARD', k)
  elseif fx == 'zrem' then
    got, bad = typed('ZCARD', k)
  else
    return malformed()
  end
  if bad then return bad end
end
-- writes
local newv = v + 1
local newv_s = string.format('%d', newv)
local change = 'updated'
if not exists then change = 'created' end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[8], '*', 'id', id, 'v', newv_s, 'op', op, 'change', change, 'kind', ARGV[6])
if not list_same then redis.call('ZADD', KEYS[4], ARGV[9], id) end
local fx_out = {}
for i = 1, fx_count do
  local at, k = fx_at + 4 * (i - 1), KEYS[5 + i]
  local fx, a, b, ttl = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
  local r
  -- A Lua number holds integers exactly only below 2^53 (a counter goes
  -- to 2^63): past it an increment answers the stored text instead.
  if fx == 'incr' then
    r = redis.call('INCRBY', k, a)
    if r >= 9007199254740992 or r <= -9007199254740992 then r = redis.call('GET', k) end
  elseif fx == 'hincr' then
    r = redis.call('HINCRBY', k, a, b)
    if r >= 9007199254740992 or r <= -9007199254740992 then r = redis.call('HGET', k, a) end
  elseif fx == 'sadd' then r = redis.call('SADD', k, a)
  elseif fx == 'srem' then r = redis.call('SREM', k, a)
  elseif fx == 'zadd' then r = redis.call('ZADD', k, b, a)
  else r = redis.call('ZREM', k, a) end
  if ttl ~= '' then redis.call('PEXPIRE', k, ttl) end
  fx_out[i] = r
end
ops = ops .. op
if #ops > keep then ops = string.sub(ops, -keep) end
redis.call('HSET', doc_key, 'v', newv_s, 'ops', ops, 'doc', ARGV[5], 'scope', scope, 'score', ARGV[9])
if not exists then redis.call('SADD', KEYS[3], scope) end
redis.call('PUBLISH', ARGV[7], scope)
return {1, newv, fx_out}
