-- sliding_log.lua: mirror of crates/sluice-core/src/algorithm/sliding_log.rs (SlidingLog).
-- Change both together: the differential tests compare every field with the memory store.
-- Params: p1 = limit N, p2 = window µs, p3 = 1 for the `attempts` variant.
-- State, a Redis string, in one of two layouts chosen by the limit N:
--   N <= SL_WHOLE: `len` 8-byte slots ('<d', µs), oldest first, no header. Read with one GET
--     and written with one SET ... PX, dropping the expired entries.
--   N >  SL_WHOLE: a ring. A 32-byte header '<ddI4I4I4I4' (newest µs, oldest held µs, len,
--     head, capacity, leases held), then `capacity` slots. A check reads the header (its
--     cached newest and oldest decide the steady state) and only the slots it needs
--     (GETRANGE), and writes in place (SETRANGE), so it is O(1) Redis work while requests
--     keep coming and O(log N) after a long gap, never O(N). As in the Rust twin, every
--     write drops the entries that expired (after an append at `now` every later decision
--     is at `now` or later), and the ring's capacity doubles or halves with what it holds.
-- Leases (sliding_log_holding.lua) are logged at their deadlines, which may lie ahead of
-- every entry, so they are kept beside the slots, never in them (a logged request still
-- costs 8 bytes): k pairs '<dd' (deadline µs, units) after the slots, then, in a whole log,
-- '<d' −k (a negative last number: no slot holds one); in a ring, k is the header's last
-- word (0 in states written before leases), and the pairs follow the `capacity` slots,
-- where room for more may be left from an earlier list (a ring is rewritten whole only
-- when its capacity changes).
-- Small logs are whole because moving a string between Redis and Lua costs about 1 µs per
-- 1 KB: past about 32 slots, reading and writing a few slots in place is cheaper.
-- Every number is an integer below 2^53 (exact in a double); nothing here builds a table
-- unless leases are held.

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

-- The log stored at `key` for a limit of `n`: the whole value (nil for a ring), len, head,
-- capacity, newest and oldest entries, and the leases held (nil when none).
local function sl_read(key, n)
  if n <= SL_WHOLE then
    local raw = redis.call('GET', key) or ''
    local size, h = #raw, nil
    if size == 0 then
      return raw, 0, 0, 0, 0, 0, nil
    end
    local last = (struct.unpack('<d', raw, size - 7))
    if last < 0 then
      size = size - 8 + 16 * last
      h = holds().read(raw, size + 1, -last, false)
    end
    local len = size / 8
    if len == 0 then
      return raw, 0, 0, 0, 0, 0, h
    end
    return raw, len, 0, len, (struct.unpack('<d', raw, size - 7)), (struct.unpack('<d', raw, 1)), h
  end
  local header = redis.call('GETRANGE', key, '0', '31')
  if #header < SL_HEADER then
    return nil, 0, 0, 0, 0, 0, nil
  end
  local newest, oldest, len, head, cap, k = struct.unpack('<ddI4I4I4I4', header)
  if k == 0 then
    return nil, len, head, cap, newest, oldest, nil
  end
  local at = SL_HEADER + 8 * cap
  return nil, len, head, cap, newest, oldest, holds().read(redis.call('GETRANGE', key, at, at + 16 * k - 1), 1, k, false)
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

-- The decision for `cost` at `now` on a log holding no lease, and asking none: allowed,
-- remaining, reset_after, retry_after (-1 none, -2 never).
local function sl_judge(key, raw, len, head, cap, oldest, newest, live, now, cost, n, window, attempts)
  local reset_now = 0
  if live > 0 then
    reset_now = newest + window - now
  end
  if cost == 0 then
    if live < n then
      return 1, n - live, reset_now, -1
    end
    return 0, 0, reset_now, sl_wait_for_rank(key, raw, len, head, cap, oldest, newest, n, window, now)
  elseif cost <= n and live + cost <= n then
    return 1, n - live - cost, window, -1
  elseif attempts ~= 1 then
    if cost > n then
      return 0, n - live, reset_now, -2
    end
    return 0, n - live, reset_now, sl_wait_for_rank(key, raw, len, head, cap, oldest, newest, n - cost + 1, window, now)
  end
  -- The attempt itself is logged: the newest `cost` entries become `now`.
  if cost > n then
    return 0, 0, window, -2
  end
  local rank = n - cost + 1
  if rank > cost then
    return 0, 0, window, sl_wait_for_rank(key, raw, len, head, cap, oldest, newest, rank - cost, window, now)
  end
  return 0, 0, window, window
end

-- The decision on a log holding leases, or asking one (sliding_log_holding.lua): a
-- function made on first use.
local sl_holding

-- The decision for `cost` (and a `lease` of more units, logged at `till`) at `now` (as
-- fw_decide's), then the plan sl_record needs: cost, the time judged at, the first live
-- index and its value, the state as read (len, head, capacity, raw), the leases held, the
-- lease and its deadline.
local function sl_decide(key, now, cost, n, window, attempts, _, lease, till)
  local raw, len, head, cap, newest, oldest, h = sl_read(key, n)
  -- Time never runs backwards inside a state.
  if len > 0 and now < newest then
    now = newest
  end
  local first, kept = sl_first_live(key, raw, len, head, cap, oldest, window, now)
  local a, r, rs, w
  if h or lease > 0 then
    local log = { key = key, raw = raw, len = len, head = head, cap = cap, newest = newest, live = len - first, read = {} }
    a, r, rs, w = sl_holding()(log, h, now, cost, n, window, attempts, lease, till)
  else
    a, r, rs, w = sl_judge(key, raw, len, head, cap, oldest, newest, len - first, now, cost, n, window, attempts)
  end
  return a, n, r, rs, w, 0, now, cost, now, first, kept, len, head, cap, raw, h, lease, till
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

-- Rewrites a ring straightened, with `capacity` slots: the live entries, then the new ones
-- (`fresh`, packed), keeping the newest `capacity` (amortized O(1): capacities double or
-- halve).
local function sl_rewrite(key, ttl, now, fresh, first, len, head, cap, capacity, h)
  local body = sl_read_range(key, len, head, cap, first) .. fresh
  local held = #body / 8
  if held > capacity then
    body = string.sub(body, 8 * (held - capacity) + 1)
    held = capacity
  end
  local header = struct.pack('<ddI4I4I4I4', now, (struct.unpack('<d', body)), held, 0, capacity, h and #h / 2 or 0)
  local value = header .. body .. string.rep('\0', 8 * (capacity - held)) .. (h and holds().pack(h) or '')
  redis.call('SET', key, value, 'PX', ttl)
end

-- Writes the new entries (`fresh`, packed, at most `cap`, the newest `now`) after the
-- newest, in place; in a full ring they replace the oldest. `kept` is the oldest live
-- entry's value, at logical index `first`. The leases `h` are written after the slots when
-- they `changed`.
local function sl_write_in_place(key, ttl, now, fresh, first, kept, len, head, cap, h, changed)
  local count = #fresh / 8
  local live = len - first
  local overwritten = math.max(live + count - cap, 0)
  if live == 0 or overwritten >= live then
    kept = (struct.unpack('<d', fresh, 8 * (overwritten - live) + 1))
  elseif overwritten > 0 then
    kept = sl_entry(key, nil, head, cap, first + overwritten)
  end
  head = (head + first) % cap
  local written = 0
  while written < count do
    local tail = (head + live) % cap
    local run = math.min(count - written, cap - tail)
    redis.call('SETRANGE', key, SL_HEADER + 8 * tail, string.sub(fresh, 8 * written + 1, 8 * (written + run)))
    local grown = math.min(run, cap - live)
    live = live + grown
    head = (head + run - grown) % cap
    written = written + run
  end
  if changed and h then
    redis.call('SETRANGE', key, SL_HEADER + 8 * cap, holds().pack(h))
  end
  redis.call('SETRANGE', key, '0', struct.pack('<ddI4I4I4I4', now, kept, live, head, cap, h and #h / 2 or 0))
  redis.call('PEXPIRE', key, ttl)
end

-- The entries of `ended` leases (pairs, oldest first): each lease's units at its deadline,
-- or at the newest entry if later (`newest`: the log stays in time order), packed.
local function sl_ended_entries(ended, newest)
  local parts = {}
  for i = 1, #ended, 2 do
    newest = math.max(ended[i], newest)
    parts[#parts + 1] = string.rep(struct.pack('<d', newest), ended[i + 1])
  end
  return table.concat(parts)
end

-- Logs the request decided by sl_decide when it is `admitted` (or always, for `attempts`),
-- after the units of the leases whose deadline has passed (sl_ended_entries: a lease's
-- deadline passed since the last admission, which logged those before it), with the leases
-- not yet ended and the one granted (at most 16: the two oldest merge at the later
-- deadline, as holds.lua's add_merging_oldest), with a TTL covering the window and every
-- lease's (SlidingLog::expires_at). Returns 0 (no stamp: a lease is found by its deadline).
local function sl_record(key, admitted, n, window, attempts, _, cost, now, first, kept, len, head, cap, raw, h, lease, till)
  if cost == 0 or not (admitted or attempts == 1) then
    return 0
  end
  local changed, fresh = false, ''
  if h then
    changed = holds().drop_until(h, now - window) > 0
    local ended = holds().take_until(h, now)
    if #ended > 0 then
      local newest = len > 0 and sl_entry(key, raw, head, cap, len - 1) or 0
      changed, fresh = true, sl_ended_entries(ended, newest)
    end
    h = holds().tidy(h)
  end
  if admitted and lease > 0 then
    h, changed = holds().add_merging_oldest(h, till, lease), true
  end
  local ttl = ttl_ms(window)
  if h then
    ttl = ttl_ms(math.max(holds().last(h), now) + window - now)
  end
  fresh = fresh .. string.rep(struct.pack('<d', now), math.min(cost, n))
  if #fresh > 8 * n then
    fresh = string.sub(fresh, #fresh - 8 * n + 1)
  end
  if raw then
    local body = string.sub(raw, 8 * first + 1, 8 * len) .. fresh
    local held = #body / 8
    if held > n then
      body = string.sub(body, 8 * (held - n) + 1)
    end
    if h then
      body = body .. holds().pack(h, true)
    end
    redis.call('SET', key, body, 'PX', ttl)
    return 0
  end
  local needed = len - first + #fresh / 8
  if needed > cap and cap < n then
    sl_rewrite(key, ttl, now, fresh, first, len, head, cap, math.min(math.max(needed, cap * 2, SL_MIN), n), h)
  elseif needed * 4 <= cap and cap > SL_MIN then
    sl_rewrite(key, ttl, now, fresh, first, len, head, cap, math.max(needed * 2, SL_MIN), h)
  else
    if #fresh > 8 * cap then
      fresh = string.sub(fresh, #fresh - 8 * cap + 1)
    end
    sl_write_in_place(key, ttl, now, fresh, first, kept, len, head, cap, h, changed)
  end
  return 0
end
