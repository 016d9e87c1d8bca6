-- single.lua: one decision for one key against one limit: the common case, without the
-- generic driver's tables (check.lua handles several limits). Appended to idiv.lua,
-- prelude.lua and the one algorithm file that sets JUDGE and RECORD.
-- KEYS[1]  the state key
-- ARGV     now_us (-1: read Redis TIME), cost, extra_ms, min_ttl_ms, p1, p2, p3, p4
-- returns  '<d' × 8: now_us, allowed (0|1), limit, remaining, reset_after_us, retry_after_us
--          (-1 none, -2 never), delay_us, judged_at_us (integers, as doubles: one packed
--          string is cheaper for Redis to return than a table of integers)

local now, cost = common_args()
local params = { tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]) }
local d, plan = JUDGE(KEYS[1], params, now, cost)
local judged_at = JUDGED_AT
RECORD(KEYS[1], params, plan, d[1] == 1)
return struct.pack('<dddddddd', now, d[1], d[2], d[3], d[4], d[5], d[6], judged_at)
