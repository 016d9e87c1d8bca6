-- sliding_log.lua: mirror of crates/sluice/src/algorithm/sliding_log.rs (SlidingLog).
-- Change both together.
-- State: a string, a 16-byte header ('<I4I4I4I4': len, head, 0 (reserved), capacity) followed
-- by `capacity` 8-byte slots ('<d', µs) forming a ring of at most `limit` timestamps (a
-- whole log stores capacity 0: its `len` slots, oldest first). As in the Rust twin, every
-- write drops the entries that expired, and the ring's capacity doubles or halves with what
-- it holds, so memory follows the entries in the window.
-- A log of up to SL_WHOLE slots is read and written whole: one GET and one SET per check,
-- and a write drops the entries already expired (they can never count again: after an
-- append at `now`, every later decision is at `now` or later). A larger log is read slot
-- by slot (GETRANGE) and written in place (SETRANGE), so a decision is O(1) Redis work in
-- the steady state and O(log limit) after a long gap, never O(limit).
-- Params: p1 = limit N, p2 = window µs, p3 = 1 for the `attempts` variant.

local SL_HEADER = 16
local SL_WHOLE = 128

local function sl_header(key, capacity)
  local h
  if capacity <= SL_WHOLE then
    h = redis.call('GET', key) or ''
  else
    h = redis.call('GETRANGE', key, 0, SL_HEADER - 1)
  end
  if #h < SL_HEADER then
    return { len = 0, head = 0, cap = 0, whole = capacity <= SL_WHOLE, raw = '' }
  end
  local len, head, _, cap = struct.unpack('<I4I4I4I4', h)
  if cap == 0 then
    cap = len
  end
  return { len = len, head = head, cap = cap, whole = capacity <= SL_WHOLE, raw = h }
end

-- The logical `index`-th entry, 0 being the oldest.
local function sl_entry(key, st, index)
  local p = st.head + index
  if p >= st.cap then
    p = p - st.cap
  end
  local offset = SL_HEADER + 8 * p
  if st.whole then
    return (struct.unpack('<d', st.raw, offset + 1))
  end
  return (struct.unpack('<d', redis.call('GETRANGE', key, offset, offset + 7)))
end

-- The slots of logical entries `from ..< len`, oldest first (whole logs only).
local function sl_slots(st, from)
  if from >= st.len then
    return ''
  end
  local function bytes(a, b)
    return string.sub(st.raw, SL_HEADER + 8 * a + 1, SL_HEADER + 8 * b)
  end
  local p = st.head + from
  if p >= st.len then
    p = p - st.len
  end
  if p >= st.head then
    return bytes(p, st.len) .. bytes(0, st.head)
  end
  return bytes(p, st.head)
end

-- Logs `count` entries stamped `now` in a whole log: the live entries, then the new ones,
-- keeping the newest `capacity`, written with the TTL in one SET.
local function sl_write_whole(key, st, now, count, first, capacity, window)
  local body = sl_slots(st, first) .. string.rep(struct.pack('<d', now), count)
  local len = #body / 8
  if len > capacity then
    body = string.sub(body, 8 * (len - capacity) + 1)
    len = capacity
  end
  store(key, struct.pack('<I4I4I4I4', len, 0, 0, 0) .. body, window)
end

local function sl_expired(entry, window, now)
  return entry + window <= now
end

-- Logical index of the oldest entry still in the window at `now` (`len` if none): every
-- entry held was live at the last write, so gallop from the oldest, then binary search.
local function sl_first_live(key, st, window, now)
  local len = st.len
  local lo = 0
  if lo >= len or not sl_expired(sl_entry(key, st, lo), window, now) then
    return lo
  end
  local step = 1
  local hi = lo + 1
  while hi < len and sl_expired(sl_entry(key, st, hi), window, now) do
    lo = hi
    step = step * 2
    hi = lo + step
  end
  hi = math.min(hi, len)
  while hi - lo > 1 do
    local mid = lo + math.floor((hi - lo) / 2)
    if sl_expired(sl_entry(key, st, mid), window, now) then
      lo = mid
    else
      hi = mid
    end
  end
  return hi
end

-- `t + window − now` for the `rank`-th newest entry (1 = newest).
local function sl_wait_for_rank(key, st, rank, window, now)
  local index = st.len - math.min(rank, st.len)
  return math.max(sl_entry(key, st, index) + window - now, 0)
end

local function sl_judge(key, p, now, cost)
  local n, window, attempts = p[1], p[2], p[3] == 1
  local st = sl_header(key, n)
  local newest = nil
  if st.len > 0 then
    newest = sl_entry(key, st, st.len - 1)
    -- Time never runs backwards inside a state.
    if now < newest then
      now = newest
    end
  end
  JUDGED_AT = now
  local first = sl_first_live(key, st, window, now)
  local live = st.len - first
  local plan = { now = now, cost = cost, first = first, st = st }
  local reset_now = 0
  if newest ~= nil and live > 0 then
    reset_now = newest + window - now
  end
  if cost == 0 then
    if live < n then
      return decision(1, n, n - live, reset_now, NONE, 0), plan
    end
    return decision(0, n, 0, reset_now, sl_wait_for_rank(key, st, n, window, now), 0), plan
  end
  if cost <= n and live + cost <= n then
    return decision(1, n, n - live - cost, window, NONE, 0), plan
  end
  if not attempts then
    if cost > n then
      return decision(0, n, n - live, reset_now, NEVER, 0), plan
    end
    local wait = sl_wait_for_rank(key, st, n - cost + 1, window, now)
    return decision(0, n, n - live, reset_now, wait, 0), plan
  end
  if cost > n then
    return decision(0, n, 0, window, NEVER, 0), plan
  end
  -- The attempt itself is logged: the newest `cost` entries become `now`.
  local rank = n - cost + 1
  local wait = window
  if rank > cost then
    wait = sl_wait_for_rank(key, st, rank - cost, window, now)
  end
  return decision(0, n, 0, window, wait, 0), plan
end

local SL_MIN = 4

-- The slots of logical entries `from ..< len`, oldest first, read with GETRANGE.
local function sl_read_range(key, st, from)
  if from >= st.len then
    return ''
  end
  local function bytes(a, b)
    if b <= a then
      return ''
    end
    return redis.call('GETRANGE', key, SL_HEADER + 8 * a, SL_HEADER + 8 * b - 1)
  end
  local p = st.head + from
  local finish = st.head + st.len
  if p >= st.cap then
    return bytes(p - st.cap, finish - st.cap)
  end
  if finish > st.cap then
    return bytes(p, st.cap) .. bytes(0, finish - st.cap)
  end
  return bytes(p, finish)
end

-- Logs `count` entries stamped `now` in a large log, after dropping the `first` expired
-- ones, keeping only the newest `limit`: in place, or by rewriting the ring straightened
-- when its capacity must double or halve (amortized O(1)).
local function sl_append(key, st, now, count, first, limit)
  local len, head, cap = st.len, st.head, st.cap
  if first >= len then
    len, head = 0, 0
  else
    head = (head + first) % cap
    len = len - first
  end
  local needed = len + count
  local resized = nil
  if needed > cap and cap < limit then
    resized = math.min(math.max(needed, cap * 2, SL_MIN), limit)
  elseif needed * 4 <= cap and cap > SL_MIN then
    resized = math.max(needed * 2, SL_MIN)
  end
  local packed = struct.pack('<d', now)
  if resized then
    local body = sl_read_range(key, st, first) .. string.rep(packed, count)
    local held = #body / 8
    if held > resized then
      body = string.sub(body, 8 * (held - resized) + 1)
      held = resized
    end
    local header = struct.pack('<I4I4I4I4', held, 0, 0, resized)
    redis.call('SET', key, header .. body .. string.rep('\0', 8 * (resized - held)))
    return
  end
  -- In place: write after the newest; in a full ring the new entries replace the oldest.
  local left = math.min(count, cap)
  while left > 0 do
    local tail = head + len
    if tail >= cap then
      tail = tail - cap
    end
    local run = math.min(left, cap - tail)
    redis.call('SETRANGE', key, SL_HEADER + 8 * tail, string.rep(packed, run))
    local grown = math.min(run, cap - len)
    len = len + grown
    head = head + (run - grown)
    if head >= cap then
      head = head - cap
    end
    left = left - run
  end
  redis.call('SETRANGE', key, 0, struct.pack('<I4I4I4I4', len, head, 0, cap))
end

local function sl_record(key, p, plan, admitted)
  local n, window, attempts = p[1], p[2], p[3] == 1
  if plan.cost == 0 or not (admitted or attempts) then
    return
  end
  local count = math.min(plan.cost, n)
  if plan.st.whole then
    sl_write_whole(key, plan.st, plan.now, count, plan.first, n, window)
    return
  end
  sl_append(key, plan.st, plan.now, count, plan.first, n)
  redis.call('PEXPIRE', key, ttl_ms(window))
end

JUDGE, RECORD = sl_judge, sl_record
