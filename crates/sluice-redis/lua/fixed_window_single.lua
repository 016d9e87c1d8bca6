-- fixed_window_single.lua: one decision for one key against one fixed window, the hot path:
-- appended to idiv.lua and now.lua (no prelude, no tables), one packed reply. It decides exactly
-- as fixed_window.lua and crates/sluice/src/algorithm/fixed_window.rs: change them together
-- (the differential tests compare every field with the in-memory store).
-- KEYS[1]  the state key, a string '<dd' (window start µs, used); missing = fresh
-- ARGV     now_us (-1: read Redis TIME), cost, extra_ms, min_ttl_ms, N, window_us,
--          1 when anchored, offset_us
-- returns  '<d' × 8: now_us, allowed (0|1), limit, remaining, reset_after_us, retry_after_us
--          (-1 none, -2 never), delay_us (0), judged_at_us (integers, as doubles)

-- `now`: the check's time, set by now.lua.
local cost, n, window, offset = tonumber(ARGV[2]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[8])
local key = KEYS[1]
local start, used = 0, 0
local raw = redis.call('GET', key)
if raw then
  start, used = struct.unpack('<dd', raw)
end
local live = used > 0
-- Time never runs backwards for a state: a request older than its window decides at its start.
local at = now
if live and at < start then
  at = start
end
local finish
if ARGV[7] ~= '1' then
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
local allowed, remaining, retry_after = 1, left, -1
if cost == 0 then
  if left <= 0 then
    allowed, remaining, retry_after = 0, 0, reset_after
  end
elseif cost > n then
  allowed, retry_after = 0, -2
elseif cost > left then
  allowed, retry_after = 0, reset_after
else
  remaining = left - cost
  local ttl = idiv(reset_after + 999, 1000) + tonumber(ARGV[3])
  redis.call('SET', key, struct.pack('<dd', window_start, used + cost), 'PX', math.max(ttl, tonumber(ARGV[4]), 1))
end
return struct.pack('<dddddddd', now, allowed, n, remaining, reset_after, retry_after, 0, at)
