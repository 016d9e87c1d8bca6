-- fixed_window.lua: mirror of crates/sluice-core/src/algorithm/fixed_window.rs (FixedWindow).
-- Change both together: the differential tests compare every field with the memory store.
-- State: a string '<dd' (window start µs, used), then, once a lease was granted on it, '<d'
-- its stamp (1 + the store's time µs of that grant: give_back.lua takes units back only
-- into the state of the lease's stamp; 0, or no third number, before). Missing key = fresh.
-- Params: p1 = limit N, p2 = window µs, p3 = 1 when anchored, p4 = offset µs.

-- The state stored as `raw` (nil: fresh): window start, used, stamp.
local function fw_read(raw)
  if not raw then
    return 0, 0, 0
  end
  local start, used = struct.unpack('<dd', raw)
  if #raw > 16 then
    return start, used, (struct.unpack('<d', raw, 17))
  end
  return start, used, 0
end

-- The decision for `cost` (and a `lease` of more units, debited with it) at `now`: allowed
-- (0|1), limit, remaining, reset_after, retry_after (-1 none, -2 never), delay, judged_at;
-- then the plan fw_record writes when the request is admitted (window start, used, µs until
-- fresh, stamp), none when nothing is written.
local function fw_decide(key, now, cost, n, window, anchored, offset, lease)
  local start, used, stamp = fw_read(redis.call('GET', key))
  if lease > 0 then
    cost = cost + lease
    if stamp == 0 then
      stamp = now + 1
    end
  end
  local live = used > 0
  -- Time never runs backwards for a state: a request older than its window decides at its start.
  local at = now
  if live and at < start then
    at = start
  end
  local finish
  if anchored ~= 1 then
    -- Aligned: the window `at` falls in ends at floor((at − offset) / window + 1) × window + offset.
    finish = idiv(at + window - offset, window) * window + offset
  elseif live and at < start + window then
    finish = start + window
  else
    finish = at + window
  end
  local window_start = math.max(finish - window, 0)
  if not (live and start == window_start) then
    used = 0
  end
  local reset_after = math.max(finish - at, 0)
  local left = n - used
  if cost == 0 then
    if left <= 0 then
      return 0, n, 0, reset_after, reset_after, 0, at
    end
    return 1, n, left, reset_after, -1, 0, at
  elseif cost > n then
    return 0, n, left, reset_after, -2, 0, at
  elseif cost > left then
    return 0, n, left, reset_after, reset_after, 0, at
  end
  return 1, n, left - cost, reset_after, -1, 0, at, window_start, used + cost, reset_after, stamp
end

-- Writes the plan of an admitted request; returns the state's stamp.
local function fw_record(key, admitted, _, _, _, _, start, used, expires_in, stamp)
  if not (admitted and start) then
    return 0
  end
  if stamp > 0 then
    redis.call('SET', key, struct.pack('<ddd', start, used, stamp), 'PX', ttl_ms(expires_in))
  else
    redis.call('SET', key, struct.pack('<dd', start, used), 'PX', ttl_ms(expires_in))
  end
  return stamp
end
