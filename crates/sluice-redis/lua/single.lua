-- single.lua: the driver for one limit, the hot path: no tables, one packed reply. script.rs
-- puts it after common.lua, the limit's algorithm file and a line naming that algorithm's
-- `decide` and `record`; check.lua is the driver for several limits.
-- returns  '<d' × 9: now_us, allowed (0|1), limit, remaining, reset_after_us, retry_after_us
--          (-1 none, -2 never), delay_us, judged_at_us, Redis TIME (µs) (integers, as
--          doubles: one packed string is cheaper for Redis to return than a table of
--          integers); an empty string when the deadline had passed (common.lua)

local key = KEYS[1]
-- The algorithm id is not read: the script holds only that algorithm.
local _, p1, p2, p3, p4 = struct.unpack('<ddddd', ARGV[1], 33)
-- A plan has at most 8 values (the sliding log's).
local allowed, limit, remaining, reset_after, retry_after, delay, at, s1, s2, s3, s4, s5, s6, s7, s8 =
  decide(key, now, cost, p1, p2, p3, p4)
record(key, allowed == 1, p1, p2, p3, p4, s1, s2, s3, s4, s5, s6, s7, s8)
return struct.pack('<ddddddddd', now, allowed, limit, remaining, reset_after, retry_after, delay, at, clock)
