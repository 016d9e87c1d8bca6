-- leaky_bucket.lua: mirror of crates/sluice-core/src/algorithm/leaky_bucket.rs (LeakyBucket, GCRA).
-- Change both together: the differential tests compare every field with the memory store.
-- State: a string '<d', the theoretical arrival time µs. Missing = 0 (fresh).
-- Params: p1 = interval µs, p2 = burst, p3 = 1 in `delay` (shaper) mode.

-- The decision for `cost` at `now` (as fw_decide's; GCRA decides at `now` itself), then the
-- plan lb_record writes when the request is admitted (the new tat, µs until fresh), none
-- when nothing is written.
local function lb_decide(key, now, cost, interval, burst, shaper)
  local tat = 0
  local raw = redis.call('GET', key)
  if raw then
    tat = (struct.unpack('<d', raw))
  end
  local limit = burst + 1
  local tolerance = limit * interval
  local ahead = math.max(tat - now, 0)
  local room = idiv(math.max(tolerance - ahead, 0), interval)
  local judged = math.max(cost, 1)
  if judged > limit then
    return 0, limit, room, ahead, -2, 0, now
  end
  local start = math.max(tat, now)
  local finish = start + judged * interval
  if finish - now > tolerance then
    return 0, limit, room, ahead, finish - tolerance - now, 0, now
  end
  local delay = 0
  if shaper == 1 then
    delay = start - now
  end
  if cost == 0 then
    return 1, limit, room, ahead, -1, delay, now
  end
  local room_after = idiv(math.max(tolerance - (finish - now), 0), interval)
  return 1, limit, room_after, finish - now, -1, delay, now, finish, finish - now
end

local function lb_record(key, admitted, _, _, _, _, tat, expires_in)
  if admitted and tat then
    redis.call('SET', key, struct.pack('<d', tat), 'PX', ttl_ms(expires_in))
  end
end

