-- microdcs delete script for `SfcState` (kind `sfc`). Generated; do not edit.
-- KEYS[1] document hash `sfc:state:{#scope}:{id}`
-- KEYS[2] change stream `changes:{#scope}` (XADD MAXLEN ~)
-- KEYS[3] group `due`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[4] group `active`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[5] group `waits`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[6] tombstone `tomb:{kind}:{#scope}:{id}`
-- ARGV[1] expected version: `any`, the version number, or `<version>:<op id>` (a revision)
-- ARGV[2] operation id, exactly 12 characters (kept in the `ops` history)
-- ARGV[3] document id
-- ARGV[4] scope
-- ARGV[5] kind (change entries)
-- ARGV[6] nudge channel (PUBLISH scope)
-- ARGV[7] change stream approximate max length
-- ARGV[8] `due`: `1` if the caller read an indexed document, else `0`; then the values read of: due
-- ARGV[10] `active`: `1` if the caller read an indexed document, else `0`; then the values read of: active
-- ARGV[12] `waits`: `1` if the caller read an indexed document, else `0`; then the values read of: type_id, waits
-- ARGV[15] how long the tombstone is kept, in milliseconds
-- Returns:
--   {1, version}          deleted; `version` was the last version
--   {0, current}          the expected version does not match
--   {2}                   no such document
--   {3, stored_scope}     the id belongs to another scope; nothing deleted
--   {5, v, scope, ops, ...} stored index fields differ from the caller's read: what is
--                         stored (`v`, `scope`, `ops`, then every index field) to try again with
--   {6, field}            corrupt hash (`v` not a version, `scope` or `doc` missing, `ops`
--                         not a history) or `{6, 'tomb'}`, a corrupt tombstone
--   {7, version}          this operation id already deleted the document at `version`
--   {9, stored_schema}    a newer schema of the type wrote the document (its stamp `sv`);
--                         nothing deleted
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
local ops = cur[3] or ''
if string.find(ops, '=', 1, true) then ops = '' end
if #ops % 12 ~= 0 or #ops / 12 > v then return {6, 'ops'} end
local tomb = redis.call('GET', KEYS[6])
local tomb_v, tomb_op, tomb_ops
if tomb then
  local tv, rest = string.match(tomb, '^([1-9][0-9]*):(.*)$')
  if not tv or #tv > 16 or tonumber(tv) > 9007199254740991 or #rest < 12 or #rest % 12 ~= 0 then return {6, 'tomb'} end
  tomb_v = tonumber(tv)
  tomb_op = string.sub(rest, 1, 12)
  tomb_ops = string.sub(rest, 13)
  if #tomb_ops / 12 > tomb_v then return {6, 'tomb'} end
end
if tomb and tomb_op == op then
  redis.call('SET', KEYS[6], tomb, 'KEEPTTL')
  return {7, tomb_v}
end
local sv = cur[5]
if exists and sv then
  if #sv > 7 or not string.find(sv, '^[1-9][0-9]*$') then return {6, 'sv'} end
  if tonumber(sv) > 1 then return {9, tonumber(sv)} end
end
if not exists then return {2} end
local expect = ARGV[1]
if expect ~= 'any' then
  local want_v, want_op = expect, nil
  local at = string.find(expect, ':', 1, true)
  if at then want_v, want_op = string.sub(expect, 1, at - 1), string.sub(expect, at + 1) end
  if want_v ~= cur[1] or (want_op and string.sub(ops, -12) ~= want_op) then return {0, v} end
end
-- index 1: group `due`
local was_1 = exists and cur[6] ~= false
if was_1 ~= (ARGV[8] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
if was_1 and (cur[6] ~= ARGV[9]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
-- index 2: group `active`
local was_2 = exists and cur[7] ~= false
if was_2 ~= (ARGV[10] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
if was_2 and (cur[7] ~= ARGV[11]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
-- index 3: group `waits`
local was_3 = exists and cur[8] ~= false and cur[9] ~= false
if was_3 ~= (ARGV[12] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
if was_3 and (cur[8] ~= ARGV[13] or cur[9] ~= ARGV[14]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9]} end
-- validation reads (a wrong type aborts here, before any write)
if was_1 then redis.call('ZSCORE', KEYS[3], id) end
if was_2 then redis.call('SISMEMBER', KEYS[4], id) end
if was_3 then redis.call('ZSCORE', KEYS[5], id) end
-- writes
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*', 'id', id, 'v', string.format('%d', v), 'op', op, 'change', 'deleted', 'kind', ARGV[5])
if was_1 then redis.call('ZREM', KEYS[3], id) end
if was_2 then redis.call('SREM', KEYS[4], id) end
if was_3 then redis.call('ZREM', KEYS[5], id) end
redis.call('DEL', doc_key)
redis.call('SET', KEYS[6], string.format('%d', v) .. ':' .. op .. ops, 'PX', ARGV[15])
redis.call('PUBLISH', ARGV[6], scope)
return {1, v}
