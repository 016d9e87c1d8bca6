-- sliding_log_single.lua: one decision for one key against one sliding log, the hot path:
-- appended to sliding_log.lua and now.lua (no prelude), no tables, one packed reply.
-- KEYS[1]  the state key
-- ARGV     now_us (-1: read Redis TIME), cost, ttl_ms (the key's TTL, computed by the
--          caller: the window plus the allowed skew, at least the floor), N, window_us,
--          1 for the `attempts` variant
-- returns  '<d' × 8: now_us, allowed (0|1), limit, remaining, reset_after_us, retry_after_us
--          (-1 none, -2 never), delay_us (0), judged_at_us (integers, as doubles)

-- `now`: the check's time, set by now.lua.
local cost, n, window, attempts = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1'
local allowed, remaining, reset_after, retry_after, at, first, kept, len, head, cap, raw =
  sl_judge(KEYS[1], n, window, attempts, now, cost)
sl_record(KEYS[1], n, attempts, ARGV[3], allowed == 1, cost, at, first, kept, len, head, cap, raw)
return struct.pack('<dddddddd', now, allowed, n, remaining, reset_after, retry_after, 0, at)
