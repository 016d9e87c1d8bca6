-- leaky_bucket.lua: mirror of crates/sluice/src/algorithm/leaky_bucket.rs (LeakyBucket, GCRA).
-- Change both together.
-- State: a string '<d', the theoretical arrival time µs. Missing = 0 (fresh).
-- Params: p1 = interval µs, p2 = burst, p3 = 1 in `delay` (shaper) mode.

local function lb_judge(key, p, now, cost)
  local interval, burst, shaper = p[1], p[2], p[3] == 1
  local raw = redis.call('GET', key)
  local tat = 0
  if raw then
    tat = (struct.unpack('<d', raw))
  end
  JUDGED_AT = now
  local limit = burst + 1
  local tolerance = limit * interval
  local start = math.max(tat, now)
  local reset_after = math.max(tat - now, 0)
  local room = idiv(math.max(tolerance - math.max(tat - now, 0), 0), interval)
  local judged = math.max(cost, 1)
  if judged > limit then
    return decision(0, limit, room, reset_after, NEVER, 0), nil
  end
  local finish = start + judged * interval
  if finish - now > tolerance then
    return decision(0, limit, room, reset_after, finish - tolerance - now, 0), nil
  end
  local delay = 0
  if shaper then
    delay = start - now
  end
  if cost == 0 then
    return decision(1, limit, room, reset_after, NONE, delay), nil
  end
  local room_after = idiv(math.max(tolerance - (finish - now), 0), interval)
  return decision(1, limit, room_after, finish - now, NONE, delay), { tat = finish, expires_in = finish - now }
end

local function lb_record(key, p, plan, admitted)
  if admitted and plan then
    store(key, struct.pack('<d', plan.tat), plan.expires_in)
  end
end

JUDGE, RECORD = lb_judge, lb_record
