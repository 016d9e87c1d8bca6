-- ttl.lua: the one TTL formula, after the arguments (common.lua for the checks,
-- give_back_args.lua for the give-back), which set extra_ms and min_ttl_ms.

-- The TTL (ms) of a state that returns to fresh in `expires_in` µs (the memory store's
-- expires_at − now): rounded up to whole ms, plus the clock skew allowed between servers,
-- at least the floor (for injected-time runs, where a trace's time can run far ahead of
-- Redis's clock; script.rs sends a floor of at least 1, as PX 0 is an error). Comparisons,
-- not math.max, and no idiv (the sliding log's script has none): this runs on every write.
local function ttl_ms(expires_in)
  local ttl = extra_ms
  if expires_in > 0 then
    -- Exact for integers 0 < expires_in < 2^53: a quotient that is not an integer exceeds
    -- one by at least 1/1000, over half the spacing of doubles there, so never rounds onto it.
    ttl = ttl + math.ceil(expires_in / 1000)
  end
  if ttl < min_ttl_ms then
    return min_ttl_ms
  end
  return ttl
end

