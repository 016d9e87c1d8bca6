-- sliding_window.lua: mirror of crates/sluice-core/src/algorithm/sliding_window.rs (SlidingWindow).
-- Change both together: the differential tests compare every field with the memory store.
-- State: a string '<d' newest bucket index, then B + 1 counters '<d' indexed by
-- bucket % (B + 1). Missing key = fresh.
-- Params: p1 = limit N, p2 = bucket width w µs, p3 = buckets B.

local function sw_state(key, slots)
  local raw = redis.call('GET', key)
  if not raw then
    return nil
  end
  local st = { newest = (struct.unpack('<d', raw)), counts = {} }
  for i = 0, slots - 1 do
    st.counts[i] = (struct.unpack('<d', raw, 9 + 8 * i))
  end
  return st
end

-- Admitted cost in bucket `index` (nil or negative: none).
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

-- Largest k with prev·(w − e) + (sum + k)·w <= N·w, or 0.
local function sw_room(n, w, prev, sum, e)
  local fits = idiv(math.max(n * w - prev * (w - e), 0), w)
  return math.max(fits - sum, 0)
end

local function sw_reset_after(newest, b, w, j, now)
  if newest ~= nil and j - newest <= b then
    return math.max((newest + b + 1) * w - now, 0)
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

-- The decision for `cost` at `now` (as fw_decide's), then the plan sw_record writes when the
-- request is admitted (the state as read, the bucket of `now`, cost, the time judged at),
-- none when nothing is written.
local function sw_decide(key, now, cost, n, w, b)
  local st = sw_state(key, b + 1)
  local newest = nil
  if st ~= nil then
    newest = st.newest
    if now < newest * w then
      now = newest * w
    end
  end
  local j = idiv(now, w)
  local e = now - j * w
  local prev = sw_count(st, b, j - b)
  local sum = sw_full_sum(st, b, j)
  local room = sw_room(n, w, prev, sum, e)
  local reset_after = sw_reset_after(newest, b, w, j, now)
  if cost == 0 then
    if room >= 1 then
      return 1, n, room, reset_after, -1, 0, now
    end
    return 0, n, 0, reset_after, sw_retry_after(st, n, w, b, j, e, 1), 0, now
  elseif cost > n then
    return 0, n, room, reset_after, -2, 0, now
  elseif cost > room then
    return 0, n, room, reset_after, sw_retry_after(st, n, w, b, j, e, cost), 0, now
  end
  return 1, n, room - cost, sw_reset_after(j, b, w, j, now), -1, 0, now, st, j, cost, now
end

local function sw_record(key, admitted, _, w, b, _, st, bucket, cost, now)
  if not (admitted and bucket) then
    return
  end
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
  counts[slot] = counts[slot] + cost
  local parts = { struct.pack('<d', newest) }
  for i = 0, slots - 1 do
    parts[#parts + 1] = struct.pack('<d', counts[i])
  end
  redis.call('SET', key, table.concat(parts), 'PX', ttl_ms((newest + b + 1) * w - now))
end

