-- sliding_window.lua: mirror of crates/sluice-core/src/algorithm/sliding_window.rs (SlidingWindow).
-- Change both together: the differential tests compare every field with the memory store.
-- State: a string '<d' newest bucket index, then B + 1 counters '<d' indexed by
-- bucket % (B + 1), then (anchored grids only) '<d' the grid's anchor µs, then, once a lease
-- was granted on it, '<d' its stamp (as fixed_window.lua's). Missing key = fresh.
-- Params: p1 = limit N, p2 = bucket width w µs, p3 = buckets B, p4 = flags: 1 = variant
-- attempts (every request is counted), + 2 = alignment anchored (the grid starts at the
-- key's first request, and again at a request that finds the estimate at 0).
-- Counters are held at N·w (a counter that large rejects every request, so no decision
-- changes); attempts policies have N·(B + 1)·w below 2^53, so every sum of counters is exact.

-- The state stored as `raw` (nil when there is none), and its stamp (0 when none).
local function sw_state(raw, slots, anchored)
  if not raw then
    return nil, 0
  end
  local st = { newest = (struct.unpack('<d', raw)), counts = {}, anchor = 0 }
  for i = 0, slots - 1 do
    st.counts[i] = (struct.unpack('<d', raw, 9 + 8 * i))
  end
  local after = 9 + 8 * slots
  if anchored then
    st.anchor = (struct.unpack('<d', raw, after))
    after = after + 8
  end
  if #raw >= after + 7 then
    return st, (struct.unpack('<d', raw, after))
  end
  return st, 0
end

-- Counted cost in bucket `index` (nil or negative: none).
local function sw_count(st, b, index)
  if st == nil or index == nil or index < 0 or index > st.newest or st.newest - index > b then
    return 0
  end
  return st.counts[index % (b + 1)]
end

local function sw_full_sum(st, b, j)
  local sum = 0
  for i = math.max(j - (b - 1), 0), j do
    sum = sum + sw_count(st, b, i)
  end
  return sum
end

-- Largest k with prev·(w − e) + (sum + k)·w <= N·w, or 0. prev·(w − e) may pass 2^53 (a
-- hammered counter at N·w): then it exceeds N·w however it rounds, and the max gives 0.
local function sw_room(n, w, prev, sum, e)
  local fits = idiv(math.max(n * w - prev * (w - e), 0), w)
  return math.max(fits - sum, 0)
end

local function sw_reset_after(anchor, newest, b, w, j, now)
  if newest ~= nil and j - newest <= b then
    return math.max(anchor + (newest + b + 1) * w - now, 0)
  end
  return 0
end

-- µs until a request of `cost <= N` fits if nothing else is admitted meanwhile.
local function sw_retry_after(st, n, w, b, j, e, cost)
  local budget = n * w
  local prev = sw_count(st, b, j - b)
  local sum = sw_full_sum(st, b, j)
  local now = j * w + e
  -- Counted by steps, not by bucket index: a loop whose bound rounds (near 2^53) must end.
  for step = 0, b + 1 do
    local k = j + step
    local earliest = 0
    if k == j then
      earliest = e
    end
    -- (sum + cost)·w may exceed 2^53: compare the counts first.
    if sum + cost <= n then
      local slack = budget - (sum + cost) * w
      local offset = earliest
      if prev > 0 then
        offset = math.max(earliest, w - idiv(slack, prev))
      end
      if offset < w then
        return k * w + offset - now
      end
    end
    prev = sw_count(st, b, k + 1 - b)
    sum = sum - prev
  end
  return b * w
end

-- The state with `cost` more in bucket `bucket` (held at `cap`), as a table like sw_state's.
local function sw_added(st, b, bucket, cost, cap)
  local slots = b + 1
  local counts, newest = {}, bucket
  for i = 0, slots - 1 do
    counts[i] = 0
  end
  if st ~= nil then
    newest = math.max(st.newest, bucket)
    -- Keep the counters still within B + 1 buckets of the new newest one.
    for i = newest - b, newest do
      if i >= 0 then
        counts[i % slots] = sw_count(st, b, i)
      end
    end
  end
  local slot = bucket % slots
  counts[slot] = math.min(counts[slot] + cost, cap)
  return { newest = newest, counts = counts }
end

-- Where a request at `now` falls: the grid's anchor, the time judged at (never before the
-- newest counted bucket's start) and the state to judge on (nil when an anchored grid starts
-- again at `now`: no counted cost in buckets j − B .. j).
local function sw_position(st, w, b, now, anchored)
  if st == nil then
    if anchored then
      return now, now, nil
    end
    return 0, now, nil
  end
  local anchor = st.anchor
  if now < anchor + st.newest * w then
    now = anchor + st.newest * w
  end
  if anchored and now >= anchor + (st.newest + b + 1) * w then
    return now, now, nil
  end
  return anchor, now, st
end

-- A rejected request of `cost` >= 1 that `room` cannot hold (as SlidingWindow::rejection):
-- under attempts it is counted first, and every field is computed on the state holding it.
local function sw_rejection(st, n, w, b, j, e, cost, room, attempts, anchor, now)
  if attempts then
    local reset_after = sw_reset_after(anchor, j, b, w, j, now)
    if cost > n then
      return 0, n, 0, reset_after, -2, 0, now
    end
    local after = sw_added(st, b, j, cost, n * w)
    return 0, n, 0, reset_after, sw_retry_after(after, n, w, b, j, e, cost), 0, now
  end
  local newest = nil
  if st ~= nil then
    newest = st.newest
  end
  local reset_after = sw_reset_after(anchor, newest, b, w, j, now)
  if cost > n then
    return 0, n, room, reset_after, -2, 0, now
  end
  return 0, n, room, reset_after, sw_retry_after(st, n, w, b, j, e, cost), 0, now
end

-- The decision for `cost` (and a `lease` of more units, debited with it) at `now` (as
-- fw_decide's), then the plan sw_record writes (the state judged on, the bucket of `now`,
-- cost, the time judged at, the grid's anchor, the stamp), none for a peek.
local function sw_decide(key, now, cost, n, w, b, flags, lease)
  local attempts, anchored = flags % 2 == 1, flags >= 2
  local read, stamp = sw_state(redis.call('GET', key), b + 1, anchored)
  if lease > 0 then
    cost = cost + lease
    if stamp == 0 then
      stamp = now + 1
    end
  end
  local anchor, st
  anchor, now, st = sw_position(read, w, b, now, anchored)
  local j = idiv(now - anchor, w)
  local e = now - anchor - j * w
  local room = sw_room(n, w, sw_count(st, b, j - b), sw_full_sum(st, b, j), e)
  if cost == 0 then
    local newest = nil
    if st ~= nil then
      newest = st.newest
    end
    local reset_after = sw_reset_after(anchor, newest, b, w, j, now)
    if room >= 1 then
      return 1, n, room, reset_after, -1, 0, now
    end
    return 0, n, 0, reset_after, sw_retry_after(st, n, w, b, j, e, 1), 0, now
  end
  if cost <= room then
    return 1, n, room - cost, sw_reset_after(anchor, j, b, w, j, now), -1, 0, now, st, j, cost, now, anchor, stamp
  end
  local allowed, limit, remaining, reset_after, retry_after, delay, at =
    sw_rejection(st, n, w, b, j, e, cost, room, attempts, anchor, now)
  return allowed, limit, remaining, reset_after, retry_after, delay, at, st, j, cost, now, anchor, stamp
end

-- Writes the plan of an admitted request (or of any, under attempts); returns the state's
-- stamp.
local function sw_record(key, admitted, n, w, b, flags, st, bucket, cost, now, anchor, stamp)
  if not bucket or not (admitted or flags % 2 == 1) then
    return 0
  end
  local added = sw_added(st, b, bucket, cost, n * w)
  local parts = { struct.pack('<d', added.newest) }
  for i = 0, b do
    parts[#parts + 1] = struct.pack('<d', added.counts[i])
  end
  if flags >= 2 then
    parts[#parts + 1] = struct.pack('<d', anchor)
  end
  if stamp > 0 then
    parts[#parts + 1] = struct.pack('<d', stamp)
  end
  redis.call('SET', key, table.concat(parts), 'PX', ttl_ms(anchor + (added.newest + b + 1) * w - now))
  return stamp
end
