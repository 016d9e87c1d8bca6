-- token_bucket.lua: mirror of crates/sluice/src/algorithm/token_bucket.rs (TokenBucket).
-- Change both together.
-- State: a string '<dd' (tokens taken out of a full bucket, last refill µs). Missing = full.
-- Params: p1 = capacity C, p2 = refill_amount, p3 = refill_interval µs.

local function tb_state(key)
  local taken, last = get_pair(key)
  return { taken = taken, last = last }
end

-- The bucket refilled up to `now` (never before its last refill): tokens, last, now.
local function tb_refilled(st, p, now)
  local c, amount, interval = p[1], p[2], p[3]
  if st.taken == 0 then
    -- A full bucket has no refill phase: it starts at the request that empties it.
    return c, now, now
  end
  if now < st.last then
    now = st.last
  end
  local ticks = idiv(now - st.last, interval)
  local tokens = c - st.taken
  -- ticks × amount may exceed 2^53, but then it is far above what fills the bucket.
  if ticks >= ceil_div(st.taken, amount) then
    return c, now, now
  end
  tokens = tokens + ticks * amount
  return tokens, st.last + ticks * interval, now
end

-- µs from `now` until the bucket holds `wanted` tokens.
local function tb_wait_for(p, tokens, last, now, wanted)
  local missing = wanted - tokens
  if missing <= 0 then
    return 0
  end
  return last + ceil_div(missing, p[2]) * p[3] - now
end

local function tb_judge(key, p, now, cost)
  local c = p[1]
  local tokens, last, now = tb_refilled(tb_state(key), p, now)
  JUDGED_AT = now
  local reset_after = tb_wait_for(p, tokens, last, now, c)
  if cost == 0 then
    if tokens >= 1 then
      return decision(1, c, tokens, reset_after, NONE, 0), nil
    end
    return decision(0, c, 0, reset_after, tb_wait_for(p, tokens, last, now, 1), 0), nil
  end
  if cost > c then
    return decision(0, c, tokens, reset_after, NEVER, 0), nil
  end
  if cost > tokens then
    return decision(0, c, tokens, reset_after, tb_wait_for(p, tokens, last, now, cost), 0), nil
  end
  local left = tokens - cost
  local full_in = tb_wait_for(p, left, last, now, c)
  local plan = { taken = c - left, last = last, expires_in = full_in }
  return decision(1, c, left, full_in, NONE, 0), plan
end

local function tb_record(key, p, plan, admitted)
  if admitted and plan then
    store(key, struct.pack('<dd', plan.taken, plan.last), plan.expires_in)
  end
end

JUDGE, RECORD = tb_judge, tb_record
