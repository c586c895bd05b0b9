-- microdcs step script for `Job` (kind `job`). Generated; do not edit.
-- KEYS[1] document hash `job:{scope}:{id}`
-- KEYS[2] change stream `changes:{scope}` (XADD MAXLEN ~)
-- KEYS[3] scope registry `scopes` (set)
-- KEYS[4] group `delayed` `q:delayed:{scope}`: new key (KEYS[1] when not indexed)
-- KEYS[5] group `delayed`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[6] group `ready` `q:ready:{scope}`: new key (KEYS[1] when not indexed)
-- KEYS[7] group `ready`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[8] group `active` `q:active:{scope}`: new key (KEYS[1] when not indexed)
-- KEYS[9] group `active`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[10] group `dead` `q:dead:{scope}`: new key (KEYS[1] when not indexed)
-- KEYS[11] group `dead`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[12] group `retention` `q:retention:{scope}`: new key (KEYS[1] when not indexed)
-- KEYS[13] group `retention`: old key as the caller read it (KEYS[1] when not indexed)
-- KEYS[14] tombstone `tomb:{kind}:{id}`, read when the document is missing
-- KEYS[15] work stream `q:events:{scope}` (XADD, no MAXLEN)
-- KEYS[16] applied-event marker `-` (KEYS[1] when the step carries no event)
-- ARGV[1] expected version: `create`, `any`, the version number, or `<version>:<op id>` (a revision: the version and the id of the write that produced it)
-- ARGV[2] operation id, exactly 12 characters (kept in the `ops` history)
-- ARGV[3] document id
-- ARGV[4] scope
-- ARGV[5] document text, stored as is in `doc`
-- ARGV[6] kind (change entries)
-- ARGV[7] nudge channel (PUBLISH scope)
-- ARGV[8] change stream approximate max length
-- ARGV[9] `delayed`: `1` if the new document is indexed, else `0`; then new values of: delayed
-- ARGV[11] `delayed`: `1` if the caller read an indexed document, else `0`; then the values read of: delayed
-- ARGV[13] `ready`: `1` if the new document is indexed, else `0`; then new values of: ready
-- ARGV[15] `ready`: `1` if the caller read an indexed document, else `0`; then the values read of: ready
-- ARGV[17] `active`: `1` if the new document is indexed, else `0`; then new values of: active
-- ARGV[19] `active`: `1` if the caller read an indexed document, else `0`; then the values read of: active
-- ARGV[21] `dead`: `1` if the new document is indexed, else `0`; then new values of: dead
-- ARGV[23] `dead`: `1` if the caller read an indexed document, else `0`; then the values read of: dead
-- ARGV[25] `retention`: `1` if the new document is indexed, else `0`; then new values of: retention
-- ARGV[27] `retention`: `1` if the caller read an indexed document, else `0`; then the values read of: retention
-- ARGV[29] `by_tag`: `1` if the new document is indexed, else `0`; then new values of: by_tag
-- ARGV[31] `by_tag`: `1` if the caller read an indexed document, else `0`; then the values read of: by_tag
-- ARGV[33] how many operation ids `ops` keeps (1 to 64)
-- ARGV[34] `by_tag`: how many keys of the values read follow in the multi-valued keys
-- ARGV[35] `by_tag` `q:bytag:{scope}:{tag}`: how many keys of the new values follow those read in the multi-valued keys
-- ARGV[36] KEYS position of the multi-valued keys: per such index, the keys of the values read, then of the new ones (the last KEYS)
-- ARGV[37] `1` if the step carries an event, else `0`
-- ARGV[38] the marker's lifetime in milliseconds
-- ARGV[39] number of work entries; then per entry its field count n and n name/value pairs; then the number of family effects m and per effect: `incr` n | `hincr` field n | `sadd`/`srem` member | `zadd` member score | `zrem` member, padded to three, and the family's lifetime in ms or ''; effect i acts on KEYS[fixed + i]
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
--   {8, job}              the step's event was applied already, by the step of document `job`;
--                         nothing written (checked after the operation id: a retry of the
--                         step that set the marker reports {7, version})
local doc_key = KEYS[1]
local id = ARGV[3]
local scope = ARGV[4]
local op = ARGV[2]
local cur = redis.call('HMGET', doc_key, 'v', 'scope', 'ops', 'doc', 'sv', 'delayed', 'ready', 'active', 'dead', 'retention', 'by_tag')
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
local keep = ARGV[33] * 12
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
  local tomb = redis.call('GET', KEYS[14])
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
      redis.call('SET', KEYS[14], tomb, 'KEEPTTL')
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
local event = ARGV[37] == '1'
if event then
  local applied = redis.call('GET', KEYS[16])
  if applied then return {8, applied} end
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
local function each_count(t, max) return t and string.find(t, '^%d+$') and #t <= 5 and tonumber(t) <= max and tonumber(t) end
local function each_malformed() return redis.error_reply('ERR microdcs: malformed multi-valued index keys') end
local cursor = each_count(ARGV[36], 99999)
if not cursor or cursor <= 16 then return each_malformed() end
local each_6_o, each_6_on = cursor, each_count(ARGV[34], 256)
if not each_6_on then return each_malformed() end
cursor = cursor + each_6_on
local each_6_n, each_6_nn = cursor, each_count(ARGV[35], 256)
if not each_6_nn then return each_malformed() end
cursor = cursor + each_6_nn
if cursor - 1 ~= #KEYS then return each_malformed() end
-- index 1: group `delayed`
local was_1 = exists and cur[6] ~= false
if was_1 ~= (ARGV[11] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
if was_1 and (cur[6] ~= ARGV[12]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
local new_1 = ARGV[9] == '1'
local keep_1 = was_1 and new_1 and KEYS[4] == KEYS[5]
-- index 2: group `ready`
local was_2 = exists and cur[7] ~= false
if was_2 ~= (ARGV[15] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
if was_2 and (cur[7] ~= ARGV[16]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
local new_2 = ARGV[13] == '1'
local keep_2 = was_2 and new_2 and KEYS[6] == KEYS[7]
-- index 3: group `active`
local was_3 = exists and cur[8] ~= false
if was_3 ~= (ARGV[19] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
if was_3 and (cur[8] ~= ARGV[20]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
local new_3 = ARGV[17] == '1'
local keep_3 = was_3 and new_3 and KEYS[8] == KEYS[9]
-- index 4: group `dead`
local was_4 = exists and cur[9] ~= false
if was_4 ~= (ARGV[23] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
if was_4 and (cur[9] ~= ARGV[24]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
local new_4 = ARGV[21] == '1'
local keep_4 = was_4 and new_4 and KEYS[10] == KEYS[11]
-- index 5: group `retention`
local was_5 = exists and cur[10] ~= false
if was_5 ~= (ARGV[27] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
if was_5 and (cur[10] ~= ARGV[28]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
local new_5 = ARGV[25] == '1'
local keep_5 = was_5 and new_5 and KEYS[12] == KEYS[13]
-- index 6: group `by_tag`
local was_6 = exists and cur[11] ~= false
if was_6 ~= (ARGV[31] == '1') then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
if was_6 and (cur[11] ~= ARGV[32]) then return {5, cur[1], cur[2], cur[3], cur[6], cur[7], cur[8], cur[9], cur[10], cur[11]} end
local new_6 = ARGV[29] == '1'
local keep_6 = was_6 and new_6 and ARGV[30] == ARGV[32]
-- validation reads (a wrong type aborts here, before any write)
if new_1 then redis.call('ZSCORE', KEYS[4], id) end
if was_1 and not keep_1 then redis.call('ZSCORE', KEYS[5], id) end
if new_2 then redis.call('ZSCORE', KEYS[6], id) end
if was_2 and not keep_2 then redis.call('ZSCORE', KEYS[7], id) end
if new_3 then redis.call('ZSCORE', KEYS[8], id) end
if was_3 and not keep_3 then redis.call('ZSCORE', KEYS[9], id) end
if new_4 then redis.call('ZSCORE', KEYS[10], id) end
if was_4 and not keep_4 then redis.call('ZSCORE', KEYS[11], id) end
if new_5 then redis.call('ZSCORE', KEYS[12], id) end
if was_5 and not keep_5 then redis.call('ZSCORE', KEYS[13], id) end
if not keep_6 then
  for i = each_6_o, each_6_o + each_6_on - 1 do redis.call('SISMEMBER', KEYS[i], id) end
  for i = each_6_n, each_6_n + each_6_nn - 1 do redis.call('SISMEMBER', KEYS[i], id) end
end
if not exists then redis.call('SISMEMBER', KEYS[3], scope) end
local function whole(text, max) return text and string.find(text, '^%d+$') and #text <= 4 and tonumber(text) <= max end
if not whole(ARGV[39], 1000) then return redis.error_reply('ERR microdcs step: malformed work entries') end
local count = tonumber(ARGV[39])
local last = 39
for _ = 1, count do
  if not whole(ARGV[last + 1], 1000) then return redis.error_reply('ERR microdcs step: malformed work entries') end
  last = last + 1 + 2 * tonumber(ARGV[last + 1])
end
if count > 0 then redis.call('XLEN', KEYS[15]) end
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
if fx_at + 4 * fx_count ~= #ARGV or 16 + fx_count ~= tonumber(ARGV[36]) - 1 then return malformed() end
for i = 1, fx_count do
  local at, k = fx_at + 4 * (i - 1), KEYS[16 + i]
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
if was_1 and not keep_1 then redis.call('ZREM', KEYS[5], id) end
if new_1 and (not keep_1 or cur[6] ~= ARGV[10]) then
  redis.call('ZADD', KEYS[4], ARGV[10], id)
end
if was_2 and not keep_2 then redis.call('ZREM', KEYS[7], id) end
if new_2 and (not keep_2 or cur[7] ~= ARGV[14]) then
  redis.call('ZADD', KEYS[6], ARGV[14], id)
end
if was_3 and not keep_3 then redis.call('ZREM', KEYS[9], id) end
if new_3 and (not keep_3 or cur[8] ~= ARGV[18]) then
  redis.call('ZADD', KEYS[8], ARGV[18], id)
end
if was_4 and not keep_4 then redis.call('ZREM', KEYS[11], id) end
if new_4 and (not keep_4 or cur[9] ~= ARGV[22]) then
  redis.call('ZADD', KEYS[10], ARGV[22], id)
end
if was_5 and not keep_5 then redis.call('ZREM', KEYS[13], id) end
if new_5 and (not keep_5 or cur[10] ~= ARGV[26]) then
  redis.call('ZADD', KEYS[12], ARGV[26], id)
end
if not keep_6 then
  local was_in, now_in = {}, {}
  for i = each_6_o, each_6_o + each_6_on - 1 do was_in[KEYS[i]] = true end
  for i = each_6_n, each_6_n + each_6_nn - 1 do now_in[KEYS[i]] = true end
  for i = each_6_o, each_6_o + each_6_on - 1 do
    if not now_in[KEYS[i]] then redis.call('SREM', KEYS[i], id) end
  end
  for i = each_6_n, each_6_n + each_6_nn - 1 do
    if not was_in[KEYS[i]] then redis.call('SADD', KEYS[i], id) end
  end
end
local pos = 40
for _ = 1, count do
  local n = tonumber(ARGV[pos])
  local entry = {'job', id, 'v', newv_s}
  for f = pos + 1, pos + 2 * n do entry[#entry + 1] = ARGV[f] end
  redis.call('XADD', KEYS[15], '*', unpack(entry))
  pos = pos + 1 + 2 * n
end
if event then redis.call('SET', KEYS[16], id, 'PX', ARGV[38]) end
local fx_out = {}
for i = 1, fx_count do
  local at, k = fx_at + 4 * (i - 1), KEYS[16 + i]
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
if new_1 and new_2 and new_3 and new_4 and new_5 and new_6 then
  redis.call('HSET', doc_key, 'v', newv_s, 'ops', ops, 'doc', ARGV[5], 'scope', scope, 'delayed', ARGV[10], 'ready', ARGV[14], 'active', ARGV[18], 'dead', ARGV[22], 'retention', ARGV[26], 'by_tag', ARGV[30])
else
  local h = {'v', newv_s, 'ops', ops, 'doc', ARGV[5]}
  if not exists then
    h[#h + 1] = 'scope'
    h[#h + 1] = scope
  end
  local drop = nil
  if new_1 then
    if cur[6] ~= ARGV[10] then
      h[#h + 1] = 'delayed'
      h[#h + 1] = ARGV[10]
    end
  elseif cur[6] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'delayed'
  end
  if new_2 then
    if cur[7] ~= ARGV[14] then
      h[#h + 1] = 'ready'
      h[#h + 1] = ARGV[14]
    end
  elseif cur[7] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'ready'
  end
  if new_3 then
    if cur[8] ~= ARGV[18] then
      h[#h + 1] = 'active'
      h[#h + 1] = ARGV[18]
    end
  elseif cur[8] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'active'
  end
  if new_4 then
    if cur[9] ~= ARGV[22] then
      h[#h + 1] = 'dead'
      h[#h + 1] = ARGV[22]
    end
  elseif cur[9] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'dead'
  end
  if new_5 then
    if cur[10] ~= ARGV[26] then
      h[#h + 1] = 'retention'
      h[#h + 1] = ARGV[26]
    end
  elseif cur[10] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'retention'
  end
  if new_6 then
    if cur[11] ~= ARGV[30] then
      h[#h + 1] = 'by_tag'
      h[#h + 1] = ARGV[30]
    end
  elseif cur[11] ~= false then
    drop = drop or {}
    drop[#drop + 1] = 'by_tag'
  end
  if drop then redis.call('HDEL', doc_key, unpack(drop)) end
  redis.call('HSET', doc_key, unpack(h))
end
if not exists then redis.call('SADD', KEYS[3], scope) end
redis.call('PUBLISH', ARGV[7], scope)
return {1, newv, fx_out}
