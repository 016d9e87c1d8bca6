-- leaky_bucket.lua: mirror of crates/sluice-core/src/algorithm/leaky_bucket.rs (LeakyBucket, GCRA).
-- Change both together: the differential tests compare every field with the memory store.
-- State: a string '<d', the theoretical arrival time µs (not counting the units held out);
-- then, while leases are held (holds.lua), '<dd' (deadline µs, units) per lease. Missing =
-- 0 (fresh).
-- Params: p1 = interval µs, p2 = burst, p3 = 1 in `delay` (shaper) mode.

-- The state stored as `raw` (nil: fresh): the arrival time and the leases.
local function lb_read(raw)
  if not raw then
    return 0, nil
  end
  if #raw == 8 then
    return (struct.unpack('<d', raw)), nil
  end
  return (struct.unpack('<d', raw)), holds().read(raw, 9, (#raw - 8) / 16, false)
end

-- The arrival time with every lease ended by `now` folded in, each as spent at its deadline.
local function lb_folded(arrival, h, now, interval)
  if h then
    for i = 1, #h, 2 do
      if h[i] > now then
        break
      end
      arrival = math.max(arrival, h[i]) + h[i + 1] * interval
    end
  end
  return arrival
end

-- The decision for `cost` (and a `lease` of more units, held until `till`) at `now`, as if
-- every unit held were spent just before the request (as fw_decide's; GCRA decides at `now`
-- itself; judged_at is -1 while leases are held, whose answers do not age with the clock),
-- then the plan lb_record writes when the request is admitted (the new arrival time, the
-- time of the decision, the leases, the lease and its deadline), none when nothing is
-- written. A lease that finds 16 held is not granted.
local function lb_decide(key, now, cost, interval, burst, shaper, _, lease, till)
  local arrival, h = lb_read(redis.call('GET', key))
  if lease > 0 and not holds().room(h, now) then
    return 0
  end
  local limit = burst + 1
  local tolerance = limit * interval
  arrival = lb_folded(arrival, h, now, interval)
  local tat = math.max(arrival, now)
  local judged = now
  if h then
    tat = tat + holds().live(h, now) * interval
    judged = -1
  end
  local ahead = tat - now
  local room = idiv(math.max(tolerance - ahead, 0), interval)
  local first = math.max(cost, 1)
  if first > limit then
    return 0, limit, room, ahead, -2, 0, judged
  end
  local finish = tat + (first + lease) * interval
  if finish - now > tolerance then
    return 0, limit, room, ahead, finish - tolerance - now, 0, judged
  end
  local delay = 0
  if shaper == 1 then
    delay = ahead
  end
  if cost == 0 then
    return 1, limit, room, ahead, -1, delay, judged
  end
  local room_after = idiv(math.max(tolerance - (finish - now), 0), interval)
  local next = math.max(arrival, now) + cost * interval
  return 1, limit, room_after, finish - now, -1, delay, judged, next, now, h, lease, till
end

-- Writes the arrival time and the leases, with a TTL until every lease held has ended and
-- been folded in (LeakyBucket::expires_at), counted from `now`.
local function lb_write(key, interval, arrival, h, now)
  if h == nil then
    redis.call('SET', key, struct.pack('<d', arrival), 'PX', ttl_ms(arrival - now))
    return
  end
  local expires_in = lb_folded(arrival, h, math.huge, interval) - now
  redis.call('SET', key, struct.pack('<d', arrival) .. holds().pack(h), 'PX', ttl_ms(expires_in))
end

-- Writes the plan of an admitted request: leases ended by then were folded in, and the one
-- granted is held. Returns 0 (no stamp: a lease is found by its deadline).
local function lb_record(key, admitted, interval, _, _, _, arrival, now, h, lease, till)
  if not (admitted and arrival) then
    return 0
  end
  if h or lease > 0 then
    holds().drop_ended(h, now)
    h = holds().clear_ended(holds().add(h, till, lease))
  end
  lb_write(key, interval, arrival, h, now)
  return 0
end
