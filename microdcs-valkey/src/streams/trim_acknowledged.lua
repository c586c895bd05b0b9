-- KEYS[1] stream. Returns the number of entries removed.
-- Keeps everything from the lowest, over all groups, of: the oldest pending
-- id, and the id after the last delivered one. Both bounds count: after
-- XGROUP SETID rewinds a group, its pending list can start above what the
-- group will be handed again.
-- Ids are compared as digit strings (never as Lua numbers, which lose
-- precision above 2^53), so any valid id is handled exactly.
local function id_lt(ams, aseq, bms, bseq)
  if ams ~= bms then return num_lt(ams, bms) end
  return num_lt(aseq, bseq)
end
-- Decimal digit string plus one.
local function succ(d)
  local i = #d
  while i > 0 and string.sub(d, i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #d) end
  return string.sub(d, 1, i - 1) .. string.char(string.byte(d, i) + 1) .. string.rep('0', #d - i)
end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if #groups == 0 then return 0 end
local best_ms, best_seq = nil, nil
local function keep(ms, seq)
  if ms == nil then return false end
  if best_ms == nil or id_lt(ms, seq, best_ms, best_seq) then
    best_ms, best_seq = ms, seq
  end
  return true
end
for _, g in ipairs(groups) do
  local name, last = nil, nil
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] end
    if g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
  local ms, seq = parse(last or '0-0')
  if ms == nil then return 0 end
  -- The id right after the last delivered one; a sequence at its 64-bit
  -- limit carries into the milliseconds, and past the last possible id
  -- nothing can be trimmed safely.
  local U64_MAX = '18446744073709551615'
  if seq ~= U64_MAX then
    seq = succ(seq)
  elseif ms ~= U64_MAX then
    ms, seq = succ(ms), '0'
  else
    return 0
  end
  if not keep(ms, seq) then return 0 end
  local pending = redis.call('XPENDING', KEYS[1], name)
  if pending[1] > 0 then
    if not keep(parse(pending[2])) then return 0 end
  end
end
return redis.call('XTRIM', KEYS[1], 'MINID', best_ms .. '-' .. best_seq)
