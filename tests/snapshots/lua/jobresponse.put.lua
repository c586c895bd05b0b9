-- microdcs put script for `JobResponse` (kind `jobresponse`). Generated; do not edit.
-- KEYS[1] document hash `jobresponse:{id}`
-- KEYS[2] change stream `changes:{scope}` (XADD MAXLEN ~)
-- KEYS[3] scope registry `scopes` (set)
-- KEYS[4] list `jobresponse:list:{scope}` (sorted set)
-- KEYS[5] unique `by_order` `jobresponse:byorder:{order}`: new key (KEYS[1] when not indexed)
-- KEYS[6] unique `by_order`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[7] group `by_state` `jobresponse:bystate:{scope}:{state}`: new key (KEYS[1] when not indexed)
-- KEYS[8] group `by_state`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[9] tombstone `tomb:{kind}:{id}`, read when the document is missing
-- ARGV[1] expected version: `create`, `any`, the version number, or `<version>:<op id>` (a revision: the version and the id of the write that produced it)
-- ARGV[2] operation id, exactly 12 characters (kept in the `ops` history)
-- ARGV[3] document id
-- ARGV[4] scope
-- ARGV[5] document text, stored as is in `doc`
-- ARGV[6] kind (change entries)
-- ARGV[7] nudge channel (PUBLISH scope)
-- ARGV[8] change stream approximate max length
-- ARGV[9] list score
-- ARGV[10] `by_order`: `1` if the new document is indexed, else `0`; then new values of: order
-- ARGV[12] `by_order`: `1` if the caller read an indexed document, else `0`; then the values read of: order
-- ARGV[14] `by_state`: `1` if the new document is indexed, else `0`; then new values of: state
-- ARGV[16] `by_state`: `1` if the caller read an indexed document, else `0`; then the values read of: state
-- ARGV[18] how many operation ids `ops` keeps (1 to 64)
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
local doc_key = KEYS[1]
local id = ARGV[3]
local scope = ARGV[4]
local op = ARGV[2]
local cur = redis.call('HMGET', doc_key, 'v', 'scope', 'ops', 'score', 'doc', 'sv', 'order', 'state')
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
local keep = ARGV[18] * 12
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
  local tomb = redis.call('GET', KEYS[9])
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
      redis.call('SET', KEYS[9], tomb, 'KEEPTTL')
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
-- index 1: unique `by_order`
local was_1 = exists and cur[7] ~= false
if was_1 ~= (ARGV[12] == '1') then return {5, cur[1], cur[2], cur[3], cur[7], cur[8]} end
if was_1 and (cur[7] ~= ARGV[13]) then return {5, cur[1], cur[2], cur[3], cur[7], cur[8]} end
local new_1 = ARGV[10] == '1'
local keep_1 = was_1 and new_1 and KEYS[5] == KEYS[6]
-- index 2: group `by_state`
local was_2 = exists and cur[8] ~= false
if was_2 ~= (ARGV[16] == '1') then return {5, cur[1], cur[2], cur[3], cur[7], cur[8]} end
if was_2 and (cur[8] ~= ARGV[17]) then return {5, cur[1], cur[2], cur[3], cur[7], cur[8]} end
local new_2 = ARGV[14] == '1'
local keep_2 = was_2 and new_2 and KEYS[7] == KEYS[8]
-- validation reads (a wrong type aborts here, before any write)
if new_1 and not keep_1 then
  local holder = redis.call('GET', KEYS[5])
  if holder and holder ~= id then return {4, 1, holder} end
end
local drop_1 = was_1 and not keep_1 and redis.call('GET', KEYS[6]) == id
local lead = not keep_2 and (was_2 or new_2)
local list_same = exists and cur[4] == ARGV[9]
if not list_same then redis.call('ZSCORE', KEYS[4], id) end
if not exists then redis.call('SISMEMBER', KEYS[3], scope) end
-- writes
local newv = v + 1
local newv_s = string.format('%d', newv)
local change = 'updated'
if not exists then change = 'created' end
local moved = 0
if lead then
  if not was_2 then
    if redis.call('SADD', KEYS[7], id) == 1 then moved = 2 end
  elseif not new_2 then
    if redis.call('SREM', KEYS[8], id) == 1 then moved = 3 end
  elseif redis.call('SMOVE', KEYS[8], KEYS[7], id) == 1 then
    moved = 1
  elseif redis.call('SADD', KEYS[7], id) == 1 then
    moved = 2
  end
end
local added = redis.pcall('XADD', KEYS[2], 'MAXLEN', '~', ARGV[8], '*', 'id', id, 'v', newv_s, 'op', op, 'change', change, 'kind', ARGV[6])
if type(added) == 'table' and added.err then
  if moved == 1 then
    redis.call('SMOVE', KEYS[7], KEYS[8], id)
  elseif moved == 2 then
    redis.call('SREM', KEYS[7], id)
  elseif moved == 3 then
    redis.call('SADD', KEYS[8], id)
  end
  return added
end
if drop_1 then redis.call('DEL', KEYS[6]) end
if new_1 and not keep_1 then redis.call('SET', KEYS[5], id) end
if not list_same then redis.call('ZADD', KEYS[4], ARGV[9], id) end
ops = ops .. op
if #ops > keep then ops = string.sub(ops, -keep) end
if new_1 and new_2 then
  redis.call('HSET', doc_key, 'v', newv_s, 'ops', ops, 'doc', ARGV[5], 'scope', scope, 'score', ARGV[9], 'order', ARGV[11], 'state', ARGV[15])
else
  local h = {'v', newv_s, 'ops', ops, 'doc', ARGV[5]}
  if not exists then
    h[#h + 1] = 'scope'
    h[#h + 1] = scope
  end
  if not list_same then
    h[#h + 1] = 'score'
    h[#h + 1] = ARGV[9]
  end
  local drop = nil
  if new_1 then
    if cur[7] ~= ARGV[11] then
      h[#h + 1] = 'order'
      h[#h + 1] = ARGV[11]
    end
  elseif cur[7] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'order'
  end
  if new_2 then
    if cur[8] ~= ARGV[15] then
      h[#h + 1] = 'state'
      h[#h + 1] = ARGV[15]
    end
  elseif cur[8] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'state'
  end
  if drop then redis.call('HDEL', doc_key, unpack(drop)) end
  redis.call('HSET', doc_key, unpack(h))
end
if not exists then redis.call('SADD', KEYS[3], scope) end
redis.call('PUBLISH', ARGV[7], scope)
return {1, newv}
