-- Stream ids, shared by the stream scripts: `parse` splits one into its
-- millisecond and sequence digits; `num_lt` compares two digit strings as
-- numbers (never as Lua numbers, which lose precision above 2^53).
local function parse(id)
  return string.match(id, '^(%d+)-(%d+)$')
end
-- Byte order, never Lua's locale-dependent string `<`.
local function bytes_lt(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local function num_lt(a, b)
  if #a ~= #b then return #a < #b end
  return bytes_lt(a, b)
end
