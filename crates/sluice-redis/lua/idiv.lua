-- idiv.lua: exact integer division, after common.lua in every script whose algorithm divides
-- (all but the sliding log's: Redis runs each function definition on every call).

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

