-- KEYS[1] sorted set; ARGV[1] page size; ARGV[2] anchor id ('' for the
-- first page); ARGV[3] anchor score as the server wrote it; ARGV[4] 'up'
-- (lowest score first) or 'down' (highest first).
-- Returns {id, score, id, score, ...}, at most ARGV[1] pairs.
local n = tonumber(ARGV[1])
local down = ARGV[4] == 'down'
local function page(from)
  if down then return redis.call('ZRANGE', KEYS[1], from, from + n - 1, 'REV', 'WITHSCORES') end
  return redis.call('ZRANGE', KEYS[1], from, from + n - 1, 'WITHSCORES')
end
if ARGV[2] == '' then return page(0) end
local s = redis.call('ZSCORE', KEYS[1], ARGV[2])
if s and tonumber(s) == tonumber(ARGV[3]) then
  if down then return page(redis.call('ZREVRANK', KEYS[1], ARGV[2]) + 1) end
  return page(redis.call('ZRANK', KEYS[1], ARGV[2]) + 1)
end
-- Byte order, as the sorted set orders members of one score.
local function above(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return la > lb
end
-- The first rank (in the walk's direction) past the anchor's old place:
-- the members of its score are in byte order (reversed when walking
-- down), so a binary search over that run finds it in a few calls however
-- many members share the score.
local lo, hi
if down then
  lo = redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[3], '+inf')
  hi = redis.call('ZCOUNT', KEYS[1], ARGV[3], '+inf')
else
  lo = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[3])
  hi = redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[3])
end
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local m
  if down then
    m = redis.call('ZRANGE', KEYS[1], mid, mid, 'REV')[1]
  else
    m = redis.call('ZRANGE', KEYS[1], mid, mid)[1]
  end
  local past = m and ((not down and above(m, ARGV[2])) or (down and m ~= ARGV[2] and not above(m, ARGV[2])))
  if past then hi = mid else lo = mid + 1 end
end
return page(lo)
