-- token_bucket.lua: mirror of crates/sluice-core/src/algorithm/token_bucket.rs (TokenBucket).
-- Change both together: the differential tests compare every field with the memory store.
-- State: a string '<dd' (tokens taken out of a full bucket, last refill µs). Missing = full.
-- Params: p1 = capacity C, p2 = refill_amount, p3 = refill_interval µs.

-- µs from `at` until a bucket holding `have` tokens, last refilled at `last`, holds `wanted`.
local function tb_wait_for(have, wanted, last, at, amount, interval)
  local missing = wanted - have
  if missing <= 0 then
    return 0
  end
  return last + idiv(missing + amount - 1, amount) * interval - at
end

-- The decision for `cost` at `now` (as fw_decide's), then the plan tb_record writes when
-- the request is admitted (tokens taken, last refill, µs until full), none when nothing is.
local function tb_decide(key, now, cost, c, amount, interval)
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
  local reset_after = tb_wait_for(tokens, c, last, at, amount, interval)
  if cost == 0 then
    if tokens < 1 then
      return 0, c, 0, reset_after, tb_wait_for(tokens, 1, last, at, amount, interval), 0, at
    end
    return 1, c, tokens, reset_after, -1, 0, at
  elseif cost > c then
    return 0, c, tokens, reset_after, -2, 0, at
  elseif cost > tokens then
    return 0, c, tokens, reset_after, tb_wait_for(tokens, cost, last, at, amount, interval), 0, at
  end
  local remaining = tokens - cost
  local full_in = tb_wait_for(remaining, c, last, at, amount, interval)
  return 1, c, remaining, full_in, -1, 0, at, c - remaining, last, full_in
end

local function tb_record(key, admitted, _, _, _, _, taken, last, expires_in)
  if admitted and taken then
    redis.call('SET', key, struct.pack('<dd', taken, last), 'PX', ttl_ms(expires_in))
  end
end

