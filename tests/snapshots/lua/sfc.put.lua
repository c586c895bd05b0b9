-- microdcs put script for `SfcState` (kind `sfc`). Generated; do not edit.
-- KEYS[1] document hash `sfc:state:{id}`
-- KEYS[2] change stream `changes:{scope}` (XADD MAXLEN ~)
-- KEYS[3] scope registry `scopes` (set)
-- KEYS[4] group `due` `sfc:due:{scope}`: new key (KEYS[1] when not indexed)
-- KEYS[5] group `due`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[6] group `active` `sfc:active:{scope}`: new key (KEYS[1] when not indexed)
-- KEYS[7] group `active`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[8] group `waits` `sfc:waits:{scope}:{type_id}`: new key (KEYS[1] when not indexed)
-- KEYS[9] group `waits`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[10] tombstone `tomb:{kind}:{id}`, read when the document is missing
-- ARGV[1] expected version: `create`, `any`, the version number, or `<version>:<op id>` (a revision: the version and the id of the write that produced it)
-- ARGV[2] operation id, exactly 12 characters (kept in the `ops` history)
-- ARGV[3] document id
-- ARGV[4] scope
-- ARGV[5] document text, stored as is in `doc`
-- ARGV[6] kind (change entries)
-- ARGV[7] nudge channel (PUBLISH scope)
-- ARGV[8] change stream approximate max length
-- ARGV[9] `due`: `1` if the new document is indexed, else `0`; then new values of: due
-- ARGV[11] `due`: `1` if the caller read an indexed document, else `0`; then the values read of: due
-- ARGV[13] `active`: `1` if the new document is indexed, else `0`; then new values of: active
-- ARGV[15] `active`: `1` if the caller read an indexed document, else `0`; then the values read of: active
-- ARGV[17] `waits`: `1` if the new document is indexed, else `0`; then new values of: type_id, waits
-- ARGV[20] `waits`: `1` if the caller read an indexed document, else `0`; then the values read of: type_id, waits
-- ARGV[23] how many operation ids `ops` keeps (1 to 64)
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
local cur = redis.call('HMGET', doc_key, 'v', 'scope', 'ops', 'doc', 'sv', 'due', 'active', 'type_id', 'waits')
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
  if cur[4] == false then return {6, 'doc'} end
  if cur[2] ~= scope then return {3, cur[2]} end
elseif redis.call('EXISTS', doc_key) == 1 then
  return {6, 'v'}
end
local keep = ARGV[23] * 12
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
  local tomb = redis.call('GET', KEYS[10])
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
      redis.call('SET', KEYS[10], tomb, 'KEEPTTL')
      return {7, tomb_v - (#tomb_ops - at + 1) / 12 + 1}
    end
    v = tomb_v
  end
end
local sv = cur[5]
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
-- index 1: group `due`
local was_1 = exists and cur[6] ~= false
if was_1 ~= (ARGV[11] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
if was_1 and (cur[6] ~= ARGV[12]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
local new_1 = ARGV[9] == '1'
local keep_1 = was_1 and new_1 and KEYS[4] == KEYS[5]
-- index 2: group `active`
local was_2 = exists and cur[7] ~= false
if was_2 ~= (ARGV[15] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
if was_2 and (cur[7] ~= ARGV[16]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
local new_2 = ARGV[13] == '1'
local keep_2 = was_2 and new_2 and KEYS[6] == KEYS[7]
-- index 3: group `waits`
local was_3 = exists and cur[8] ~= false and cur[9] ~= false
if was_3 ~= (ARGV[20] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
if was_3 and (cur[8] ~= ARGV[21] or cur[9] ~= ARGV[22]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
local new_3 = ARGV[17] == '1'
local keep_3 = was_3 and new_3 and KEYS[8] == KEYS[9]
-- validation reads (a wrong type aborts here, before any write)
if new_1 then redis.call('ZSCORE', KEYS[4], id) end
if was_1 and not keep_1 then redis.call('ZSCORE', KEYS[5], id) end
local lead = not keep_2 and (was_2 or new_2)
if new_3 then redis.call('ZSCORE', KEYS[8], id) end
if was_3 and not keep_3 then redis.call('ZSCORE', KEYS[9], id) end
if not exists then redis.call('SISMEMBER', KEYS[3], scope) end
-- writes
local newv = v + 1
local newv_s = string.format('%d', newv)
local change = 'updated'
if not exists then change = 'created' end
local moved = 0
if lead then
  if not was_2 then
    if redis.call('SADD', KEYS[6], id) == 1 then moved = 2 end
  elseif not new_2 then
    if redis.call('SREM', KEYS[7], id) == 1 then moved = 3 end
  elseif redis.call('SMOVE', KEYS[7], KEYS[6], id) == 1 then
    moved = 1
  elseif redis.call('SADD', KEYS[6], id) == 1 then
    moved = 2
  end
end
local added = redis.pcall('XADD', KEYS[2], 'MAXLEN', '~', ARGV[8], '*', 'id', id, 'v', newv_s, 'op', op, 'change', change, 'kind', ARGV[6])
if type(added) == 'table' and added.err then
  if moved == 1 then
    redis.call('SMOVE', KEYS[6], KEYS[7], id)
  elseif moved == 2 then
    redis.call('SREM', KEYS[6], id)
  elseif moved == 3 then
    redis.call('SADD', KEYS[7], id)
  end
  return added
end
if was_1 and not keep_1 then redis.call('ZREM', KEYS[5], id) end
if new_1 and (not keep_1 or cur[6] ~= ARGV[10]) then
  redis.call('ZADD', KEYS[4], ARGV[10], id)
end
if was_3 and not keep_3 then redis.call('ZREM', KEYS[9], id) end
if new_3 and (not keep_3 or cur[9] ~= ARGV[19]) then
  redis.call('ZADD', KEYS[8], ARGV[19], id)
end
ops = ops .. op
if #ops > keep then ops = string.sub(ops, -keep) end
if new_1 and new_2 and new_3 then
  redis.call('HSET', doc_key, 'v', newv_s, 'ops', ops, 'doc', ARGV[5], 'scope', scope, 'due', ARGV[10], 'active', ARGV[14], 'type_id', ARGV[18], 'waits', ARGV[19])
else
  local h = {'v', newv_s, 'ops', ops, 'doc', ARGV[5]}
  if not exists then
    h[#h + 1] = 'scope'
    h[#h + 1] = scope
  end
  local drop = nil
  if new_1 then
    if cur[6] ~= ARGV[10] then
      h[#h + 1] = 'due'
      h[#h + 1] = ARGV[10]
    end
  elseif cur[6] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'due'
  end
  if new_2 then
    if cur[7] ~= ARGV[14] then
      h[#h + 1] = 'active'
      h[#h + 1] = ARGV[14]
    end
  elseif cur[7] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'active'
  end
  if new_3 then
    if cur[8] ~= ARGV[18] then
      h[#h + 1] = 'type_id'
      h[#h + 1] = ARGV[18]
    end
  elseif cur[8] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'type_id'
  end
  if new_3 then
    if cur[9] ~= ARGV[19] then
      h[#h + 1] = 'waits'
      h[#h + 1] = ARGV[19]
    end
  elseif cur[9] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'waits'
  end
  if drop then redis.call('HDEL', doc_key, unpack(drop)) end
  redis.call('HSET', doc_key, unpack(h))
end
if not exists then redis.call('SADD', KEYS[3], scope) end
redis.call('PUBLISH', ARGV[7], scope)
return {1, newv}
