-- leaky_bucket_single.lua: one decision for one key against one leaky bucket (GCRA), a hot
-- path: appended to idiv.lua and now.lua (no prelude, no tables), one packed reply. It decides
-- exactly as leaky_bucket.lua and crates/sluice/src/algorithm/leaky_bucket.rs: change them
-- together (the differential tests compare every field with the in-memory store).
-- KEYS[1]  the state key, a string '<d' (the theoretical arrival time µs); missing = 0
-- ARGV     now_us (-1: read Redis TIME), cost, extra_ms, min_ttl_ms, interval_us, burst,
--          1 in `delay` (shaper) mode
-- returns  '<d' × 8: now_us, allowed (0|1), limit, remaining, reset_after_us, retry_after_us
--          (-1 none, -2 never), delay_us, judged_at_us (integers, as doubles)

-- `now`: the check's time, set by now.lua.
local cost, interval, burst = tonumber(ARGV[2]), tonumber(ARGV[5]), tonumber(ARGV[6])
local key = KEYS[1]
local tat = 0
local raw = redis.call('GET', key)
if raw then
  tat = (struct.unpack('<d', raw))
end
local limit = burst + 1
local tolerance = limit * interval
local ahead = math.max(tat - now, 0)
local start = math.max(tat, now)
local judged = math.max(cost, 1)
local allowed, remaining, reset_after, retry_after, delay =
  1, idiv(math.max(tolerance - ahead, 0), interval), ahead, -1, 0
if judged > limit then
  allowed, retry_after = 0, -2
else
  local finish = start + judged * interval
  if finish - now > tolerance then
    allowed, retry_after = 0, finish - tolerance - now
  else
    if ARGV[7] == '1' then
      delay = start - now
    end
    if cost > 0 then
      remaining, reset_after = idiv(math.max(tolerance - (finish - now), 0), interval), finish - now
      local ttl = idiv(math.max(finish - now, 0) + 999, 1000) + tonumber(ARGV[3])
      redis.call('SET', key, struct.pack('<d', finish), 'PX', math.max(ttl, tonumber(ARGV[4]), 1))
    end
  end
end
return struct.pack('<dddddddd', now, allowed, limit, remaining, reset_after, retry_after, delay, now)
