-- microdcs lease: helpers put in front of every lease script.
-- A fencing counter or token is canonical decimal text: digits only, no
-- leading zero ('0' itself is fine), at most 2^53-1. Lua numbers are
-- doubles, so such a text is never converted to a number: it is compared by
-- length, then byte by byte (not with `<` on strings, which follows the
-- server's locale).
local MAX_COUNTER = '9007199254740991'
-- Whether canonical text a is below canonical text b.
local function less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local function canonical(s)
  if type(s) ~= 'string' then return false end
  if s == '0' then return true end
  if not string.find(s, '^[1-9][0-9]*$') then return false end
  return not less(MAX_COUNTER, s)
end
-- Whether key is absent or of the Valkey type want.
local function type_ok(key, want)
  local t = redis.call('TYPE', key)['ok']
  return t == 'none' or t == want
end
-- Whether a request cache entry (HMGET fp r1 r2 r3 r4) holds a result this
-- script can have written: its status is one of `statuses` (status -> the
-- positions, 3 to 5, that must hold whole numbers of milliseconds or a
-- canonical token) and every field is there. A damaged entry is reported as
-- corrupt and never replayed: a caller would take it as the lease's state.
local function cached_ok(c, statuses)
  local numbers = statuses[c[2]]
  if not numbers then return false end
  for i = 3, 5 do
    if type(c[i]) ~= 'string' then return false end
  end
  for _, i in ipairs(numbers) do
    if not canonical(c[i]) then return false end
  end
  return true
end
local CACHED_DAMAGED = 'the cached result of this request id is damaged'
