-- single.lua: the driver for one limit, the hot path: no tables, one packed reply. script.rs
-- puts it after common.lua, the limit's algorithm files and a line naming that algorithm's
-- `decide` and `record`; check.lua is the driver for several limits.
-- A lease (common.lua) is decided with the request, and when it does not fit, the request
-- alone, in this one call (MemoryStore::check_and_lease_now).
-- returns  '<d' × 9: now_us, allowed (0|1), limit, remaining, reset_after_us, retry_after_us
--          (-1 none, -2 never), delay_us, judged_at_us (-1 when the answer does not age with
--          the clock), then, only when a lease was asked, granted (0|1) and the state's
--          stamp (fixed_window.lua; 0 for the others), then Redis TIME (µs) (integers, as
--          doubles: one packed string is cheaper for Redis to return than a table of
--          integers); an empty string when the deadline had passed (common.lua)

local key = KEYS[1]
-- The algorithm id is not read: the script holds only that algorithm.
local _, p1, p2, p3, p4 = struct.unpack('<ddddd', ARGV[1], limits_at)
-- A plan has at most 11 values (the sliding log's).
local allowed, limit, remaining, reset_after, retry_after, delay, at, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11
local granted = 0
if lease > 0 and cost > 0 then
  allowed, limit, remaining, reset_after, retry_after, delay, at, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11 =
    decide(key, now, cost, p1, p2, p3, p4, lease, lease_until)
  if allowed == 1 then
    granted = 1
  end
end
if granted == 0 then
  allowed, limit, remaining, reset_after, retry_after, delay, at, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11 =
    decide(key, now, cost, p1, p2, p3, p4, 0, 0)
end
local stamp = record(key, allowed == 1, p1, p2, p3, p4, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11)
if lease > 0 then
  return struct.pack('<ddddddddddd', now, allowed, limit, remaining, reset_after, retry_after, delay, at, granted,
    stamp * granted, clock)
end
return struct.pack('<ddddddddd', now, allowed, limit, remaining, reset_after, retry_after, delay, at, clock)
