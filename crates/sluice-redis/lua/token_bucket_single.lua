-- token_bucket_single.lua: one decision for one key against one token bucket, a hot path:
-- appended to idiv.lua and now.lua (no prelude, no tables), one packed reply. It decides exactly
-- as token_bucket.lua and crates/sluice/src/algorithm/token_bucket.rs: change them together
-- (the differential tests compare every field with the in-memory store).
-- KEYS[1]  the state key, a string '<dd' (tokens taken out of a full bucket, last refill
--          µs); missing = full
-- ARGV     now_us (-1: read Redis TIME), cost, extra_ms, min_ttl_ms, capacity C,
--          refill_amount, refill_interval_us
-- returns  '<d' × 8: now_us, allowed (0|1), limit, remaining, reset_after_us, retry_after_us
--          (-1 none, -2 never), delay_us (0), judged_at_us (integers, as doubles)

-- `now`: the check's time, set by now.lua.
local cost, c, amount, interval = tonumber(ARGV[2]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local key = KEYS[1]
local taken, last = 0, 0
local raw = redis.call('GET', key)
if raw then
  taken, last = struct.unpack('<dd', raw)
end
-- The bucket refilled up to `at`: `tokens`, and the time of its `last` refill.
local at, tokens = now, c
if taken == 0 then
  -- A full bucket has no refill phase: it starts at the request that empties it.
  last = now
else
  -- Time never runs backwards for a state.
  if at < last then
    at = last
  end
  local ticks = idiv(at - last, interval)
  -- ticks × amount may exceed 2^53, but then it is far above what fills the bucket.
  if ticks >= idiv(taken + amount - 1, amount) then
    last = at
  else
    tokens, last = c - taken + ticks * amount, last + ticks * interval
  end
end

-- µs from `at` until a bucket holding `have` tokens holds `wanted`.
local function wait_for(have, wanted)
  local missing = wanted - have
  if missing <= 0 then
    return 0
  end
  return last + idiv(missing + amount - 1, amount) * interval - at
end

local reset_after = wait_for(tokens, c)
local allowed, remaining, retry_after = 1, tokens, -1
if cost == 0 then
  if tokens < 1 then
    allowed, remaining, retry_after = 0, 0, wait_for(tokens, 1)
  end
elseif cost > c then
  allowed, retry_after = 0, -2
elseif cost > tokens then
  allowed, retry_after = 0, wait_for(tokens, cost)
else
  remaining = tokens - cost
  reset_after = wait_for(remaining, c)
  local ttl = idiv(math.max(reset_after, 0) + 999, 1000) + tonumber(ARGV[3])
  redis.call('SET', key, struct.pack('<dd', c - remaining, last), 'PX', math.max(ttl, tonumber(ARGV[4]), 1))
end
return struct.pack('<dddddddd', now, allowed, c, remaining, reset_after, retry_after, 0, at)
