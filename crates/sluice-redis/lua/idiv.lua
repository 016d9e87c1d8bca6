-- idiv.lua: exact integer division, the first part of every script that divides
-- (prelude.lua's helpers and the lean single-limit scripts use it).
-- Every number a script handles is an integer below 2^53, so Lua's doubles are exact.

-- floor(a / b) for integers 0 <= a < 2^53 and b >= 1, exactly (a double division can
-- round up across an integer boundary).
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

