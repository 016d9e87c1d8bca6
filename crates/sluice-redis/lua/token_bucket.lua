-- token_bucket.lua: mirror of crates/sluice-core/src/algorithm/token_bucket.rs (TokenBucket).
-- Change both together: the differential tests compare every field with the memory store.
-- State: a string '<dd' (tokens taken out of a full bucket, last refill µs); while leases are
-- held or ended since the bucket was last full (holds.lua), then '<d' 1 when ended (0
-- otherwise) and '<dd' (deadline µs, units) per lease. Missing = full.
-- Params: p1 = capacity C, p2 = refill_amount, p3 = refill_interval µs.

-- The state stored as `raw` (nil: a full bucket): taken, last refill, leases.
local function tb_read(raw)
  if not raw then
    return 0, 0, nil
  end
  local taken, last = struct.unpack('<dd', raw)
  if #raw == 16 then
    return taken, last, nil
  end
  return taken, last, holds().read(raw, 25, (#raw - 24) / 16, struct.unpack('<d', raw, 17) == 1)
end

-- µs from `at` until a bucket holding `have` tokens, last refilled at `last`, holds `wanted`.
local function tb_wait_for(have, wanted, last, at, amount, interval)
  local missing = wanted - have
  if missing <= 0 then
    return 0
  end
  return last + idiv(missing + amount - 1, amount) * interval - at
end

-- The bucket refilled up to `now` (never before its last refill): tokens, last refill, and
-- the time judged at. With leases held or ended, it never refills above C less the units
-- still held, each lease that ended by then raising that cap at its deadline, in turn.
local function tb_refilled(taken, last, h, now, c, amount, interval)
  if h then
    -- `tokens` last refilled at `since`, refilled up to `till`, never above `cap`: the
    -- refill clock restarts at `till` when the bucket ends within one refill of the cap.
    -- (Made here, only for a bucket that holds leases.)
    local function refill_capped(tokens, since, till, cap)
      local ticks = idiv(till - since, interval)
      -- ticks × amount may exceed 2^53, but then it is far above the cap.
      tokens = math.min(tokens + ticks * amount, cap)
      if tokens + amount > cap then
        return tokens, till
      end
      return tokens, since + ticks * interval
    end
    local at = math.max(now, last)
    local held = holds().live(h, last)
    local tokens, since = c - taken, last
    for i = 1, #h, 2 do
      if h[i] > at then
        break
      end
      if h[i] > last then
        tokens, since = refill_capped(tokens, since, h[i], math.max(c - held, 0))
        held = math.max(held - h[i + 1], 0)
      end
    end
    tokens, since = refill_capped(tokens, since, at, math.max(c - held, 0))
    return tokens, since, at
  end
  if taken == 0 then
    -- A full bucket has no refill phase: it starts at the request that empties it.
    return c, now, now
  end
  -- Time never runs backwards for a state.
  local at = math.max(now, last)
  local ticks = idiv(at - last, interval)
  -- ticks × amount may exceed 2^53, but then it is far above what fills the bucket.
  if ticks >= idiv(taken + amount - 1, amount) then
    return c, at, at
  end
  return c - taken + ticks * amount, last + ticks * interval, at
end

-- The decision for `cost` (and a `lease` of more units, held until `till`) at `now` (as
-- fw_decide's; judged_at is -1 while leases are held or ended, whose answers do not age
-- with the clock), then the plan tb_record writes when the request is admitted (tokens
-- taken, last refill, the time judged at, the leases, the lease and its deadline), none
-- when nothing is written. A lease that finds 16 held is not granted.
local function tb_decide(key, now, cost, c, amount, interval, _, lease, till)
  local taken, last, h = tb_read(redis.call('GET', key))
  if lease > 0 and not holds().room(h, now) then
    return 0
  end
  local tokens, at
  tokens, last, at = tb_refilled(taken, last, h, now, c, amount, interval)
  local judged = at
  if h then
    judged = -1
  end
  local reset_after = tb_wait_for(tokens, c, last, at, amount, interval)
  if cost == 0 then
    if tokens < 1 then
      return 0, c, 0, reset_after, tb_wait_for(tokens, 1, last, at, amount, interval), 0, judged
    end
    return 1, c, tokens, reset_after, -1, 0, judged
  elseif cost > c then
    return 0, c, tokens, reset_after, -2, 0, judged
  elseif cost + lease > tokens then
    return 0, c, tokens, reset_after, tb_wait_for(tokens, cost, last, at, amount, interval), 0, judged
  end
  local remaining = tokens - cost - lease
  local full_in = tb_wait_for(remaining, c, last, at, amount, interval)
  return 1, c, remaining, full_in, -1, 0, judged, c - remaining, last, at, h, lease, till
end

-- Writes `taken`, `last` and the leases `h`, with a TTL until the bucket is full again and
-- every lease held has ended and refilled (TokenBucket::expires_at), counted from `at`.
local function tb_write(key, c, amount, interval, taken, last, h, at)
  local expires_in = tb_wait_for(c - taken, c, last, at, amount, interval)
  if h == nil then
    redis.call('SET', key, struct.pack('<dd', taken, last), 'PX', ttl_ms(expires_in))
    return
  end
  local deadline = holds().last(h)
  if deadline then
    local refill = idiv(c + amount - 1, amount) * interval
    expires_in = math.max(expires_in, deadline + refill - at)
  end
  local ended = 0
  if h.ended then
    ended = 1
  end
  local value = struct.pack('<ddd', taken, last, ended) .. holds().pack(h)
  redis.call('SET', key, value, 'PX', ttl_ms(expires_in))
end

-- Writes the plan of an admitted request: leases ended by then no longer cap the bucket,
-- and the one granted is held. Returns 0 (no stamp: a lease is found by its deadline).
local function tb_record(key, admitted, c, amount, interval, _, taken, last, at, h, lease, till)
  if not (admitted and taken) then
    return 0
  end
  if h or lease > 0 then
    holds().drop_ended(h, at)
    h = holds().add(h, till, lease)
    if taken == 0 and #h == 0 then
      h = holds().clear_ended(h)
    end
  end
  tb_write(key, c, amount, interval, taken, last, h, at)
  return 0
end
