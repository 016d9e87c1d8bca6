-- sliding_log.lua: mirror of crates/sluice-core/src/algorithm/sliding_log.rs (SlidingLog).
-- Change both together: the differential tests compare every field with the memory store.
-- Params: p1 = limit N, p2 = window µs, p3 = 1 for the `attempts` variant.
-- State, a Redis string, in one of two layouts chosen by the limit N:
--   N <= SL_WHOLE: `len` 8-byte slots ('<d', µs), oldest first, no header. Read with one GET
--     and written with one SET ... PX, dropping the expired entries.
--   N >  SL_WHOLE: a ring. A 32-byte header '<ddI4I4I4I4' (newest µs, oldest held µs, len,
--     head, capacity, 0 reserved), then `capacity` slots. A check reads the header (its cached
--     newest and oldest decide the steady state) and only the slots it needs (GETRANGE),
--     and writes in place (SETRANGE), so it is O(1) Redis work while requests keep coming
--     and O(log N) after a long gap, never O(N). As in the Rust twin, every write drops
--     the entries that expired (after an append at `now` every later decision is at `now`
--     or later), and the ring's capacity doubles or halves with what it holds.
-- Small logs are whole because moving a string between Redis and Lua costs about 1 µs per
-- 1 KB: past about 32 slots, reading and writing a few slots in place is cheaper.
-- Every number is an integer below 2^53 (exact in a double); nothing here builds a table.

local SL_WHOLE = 32
local SL_HEADER = 32
local SL_MIN = 4

-- The logical `index`-th entry, 0 being the oldest: from `raw` (a whole log, head 0), or
-- read from the ring.
local function sl_entry(key, raw, head, cap, index)
  local p = head + index
  if p >= cap then
    p = p - cap
  end
  if raw then
    return (struct.unpack('<d', raw, 8 * p + 1))
  end
  local offset = SL_HEADER + 8 * p
  return (struct.unpack('<d', redis.call('GETRANGE', key, offset, offset + 7)))
end

-- Logical index of the oldest entry still in the window at `now` (`len` if none) and its
-- value (nil if none): every entry held was live at the last write, so gallop from the
-- oldest, then binary search.
local function sl_first_live(key, raw, len, head, cap, oldest, window, now)
  if len == 0 or oldest + window > now then
    return 0, oldest
  end
  local lo, step, hi = 0, 1, 1
  local value = nil
  while hi < len do
    value = sl_entry(key, raw, head, cap, hi)
    if value + window > now then
      break
    end
    value = nil
    lo = hi
    step = step * 2
    hi = lo + step
  end
  if hi > len then
    hi = len
  end
  while hi - lo > 1 do
    local mid = lo + math.floor((hi - lo) / 2)
    local entry = sl_entry(key, raw, head, cap, mid)
    if entry + window <= now then
      lo = mid
    else
      hi, value = mid, entry
    end
  end
  return hi, value
end

-- `t + window − now` for the `rank`-th newest entry (1 = newest).
local function sl_wait_for_rank(key, raw, len, head, cap, oldest, newest, rank, window, now)
  local index = len - math.min(rank, len)
  local entry = oldest
  if index == len - 1 then
    entry = newest
  elseif index > 0 then
    entry = sl_entry(key, raw, head, cap, index)
  end
  return math.max(entry + window - now, 0)
end

-- The decision for `cost` at `now` (as fw_decide's), then the plan sl_record needs: cost, the
-- time judged at, the first live index and its value, and the state as read (len, head,
-- capacity, raw).
local function sl_decide(key, now, cost, n, window, attempts)
  local raw, len, head, cap, newest, oldest = nil, 0, 0, 0, 0, 0
  if n <= SL_WHOLE then
    raw = redis.call('GET', key) or ''
    len = #raw / 8
    cap = len
    if len > 0 then
      oldest = (struct.unpack('<d', raw, 1))
      newest = (struct.unpack('<d', raw, #raw - 7))
    end
  else
    local header = redis.call('GETRANGE', key, '0', '31')
    if #header == SL_HEADER then
      newest, oldest, len, head, cap = struct.unpack('<ddI4I4I4', header)
    end
  end
  -- Time never runs backwards inside a state.
  if len > 0 and now < newest then
    now = newest
  end
  local first, kept = sl_first_live(key, raw, len, head, cap, oldest, window, now)
  local live = len - first
  local reset_now = 0
  if live > 0 then
    reset_now = newest + window - now
  end
  local a, r, rs, w = 1, 0, window, -1
  if cost == 0 then
    if live < n then
      r, rs = n - live, reset_now
    else
      a, rs = 0, reset_now
      w = sl_wait_for_rank(key, raw, len, head, cap, oldest, newest, n, window, now)
    end
  elseif cost <= n and live + cost <= n then
    r = n - live - cost
  elseif attempts ~= 1 then
    a, r, rs, w = 0, n - live, reset_now, -2
    if cost <= n then
      w = sl_wait_for_rank(key, raw, len, head, cap, oldest, newest, n - cost + 1, window, now)
    end
  else
    -- The attempt itself is logged: the newest `cost` entries become `now`.
    a, w = 0, -2
    if cost <= n then
      local rank = n - cost + 1
      w = window
      if rank > cost then
        w = sl_wait_for_rank(key, raw, len, head, cap, oldest, newest, rank - cost, window, now)
      end
    end
  end
  return a, n, r, rs, w, 0, now, cost, now, first, kept, len, head, cap, raw
end

-- The slots of logical entries `from ..< len` of a ring, oldest first (GETRANGE).
local function sl_read_range(key, len, head, cap, from)
  local p, finish = head + from, head + len
  if from >= len then
    return ''
  elseif p >= cap then
    p, finish = p - cap, finish - cap
  elseif finish > cap then
    return redis.call('GETRANGE', key, SL_HEADER + 8 * p, SL_HEADER + 8 * cap - 1)
      .. redis.call('GETRANGE', key, SL_HEADER, SL_HEADER + 8 * (finish - cap) - 1)
  end
  return redis.call('GETRANGE', key, SL_HEADER + 8 * p, SL_HEADER + 8 * finish - 1)
end

-- Rewrites a ring straightened, with `capacity` slots: the live entries, then `count`
-- new ones, keeping the newest `capacity` (amortized O(1): capacities double or halve).
local function sl_rewrite(key, ttl, now, count, first, len, head, cap, capacity)
  local body = sl_read_range(key, len, head, cap, first) .. string.rep(struct.pack('<d', now), count)
  local held = #body / 8
  if held > capacity then
    body = string.sub(body, 8 * (held - capacity) + 1)
    held = capacity
  end
  local header = struct.pack('<ddI4I4I4I4', now, (struct.unpack('<d', body)), held, 0, capacity, 0)
  redis.call('SET', key, header .. body .. string.rep('\0', 8 * (capacity - held)), 'PX', ttl)
end

-- Writes `count` entries stamped `now` after the newest, in place; in a full ring they
-- replace the oldest. `kept` is the oldest live entry's value, at logical index `first`.
local function sl_write_in_place(key, ttl, now, count, first, kept, len, head, cap)
  local live = len - first
  local overwritten = math.max(live + count - cap, 0)
  if live == 0 or overwritten >= live then
    kept = now
  elseif overwritten > 0 then
    kept = sl_entry(key, nil, head, cap, first + overwritten)
  end
  head = (head + first) % cap
  local packed = struct.pack('<d', now)
  local left = count
  while left > 0 do
    local tail = (head + live) % cap
    local run = math.min(left, cap - tail)
    redis.call('SETRANGE', key, SL_HEADER + 8 * tail, string.rep(packed, run))
    local grown = math.min(run, cap - live)
    live = live + grown
    head = (head + run - grown) % cap
    left = left - run
  end
  redis.call('SETRANGE', key, '0', struct.pack('<ddI4I4I4I4', now, kept, live, head, cap, 0))
  redis.call('PEXPIRE', key, ttl)
end

-- Logs the request decided by sl_decide when it is `admitted` (or always, for `attempts`),
-- with a TTL covering the window.
local function sl_record(key, admitted, n, window, attempts, _, cost, now, first, kept, len, head, cap, raw)
  if cost == 0 or not (admitted or attempts == 1) then
    return
  end
  local ttl = ttl_ms(window)
  local count = math.min(cost, n)
  if raw then
    local body = string.sub(raw, 8 * first + 1) .. string.rep(struct.pack('<d', now), count)
    local held = #body / 8
    if held > n then
      body = string.sub(body, 8 * (held - n) + 1)
    end
    redis.call('SET', key, body, 'PX', ttl)
    return
  end
  local needed = len - first + count
  if needed > cap and cap < n then
    sl_rewrite(key, ttl, now, count, first, len, head, cap, math.min(math.max(needed, cap * 2, SL_MIN), n))
  elseif needed * 4 <= cap and cap > SL_MIN then
    sl_rewrite(key, ttl, now, count, first, len, head, cap, math.max(needed * 2, SL_MIN))
  else
    sl_write_in_place(key, ttl, now, math.min(count, cap), first, kept, len, head, cap)
  end
end
