-- common.lua: the start of every check script (script.rs puts it first): the arguments every
-- check shares. Then come ttl.lua (the one TTL formula), idiv.lua when an algorithm divides,
-- holds.lua when one holds leases, the algorithm files, and a driver (single.lua for one
-- limit, check.lua for several).
-- KEYS[i]  the state key of limit i (several limits share one hash tag: one Cluster slot)
-- ARGV[2]  optional: the deadline, one little-endian double: Redis TIME (µs) past which the
--          check writes nothing and replies with an empty string (store/deadline.rs: the
--          caller stopped waiting, and answered by its failure mode)
-- ARGV[1]  one layout for every script: little-endian doubles ('<d', integers) now_us (-1:
--          read Redis TIME), cost, extra_ms (added to every TTL: the clock skew allowed),
--          min_ttl_ms; then, only when a lease is asked, lease (units beyond cost) and
--          period_us (how long they may be spent after the decision); then per limit i,
--          from byte `limits_at` + 40 (i − 1): algorithm id (check.lua's ALGORITHMS), p1,
--          p2, p3, p4. The head is 32 bytes, or 48 with a lease: told apart by the length,
--          32 + 40 L or 48 + 40 L. One packed argument costs Redis far less than 4 + 5 L
--          separate ones (each is parsed, allocated and pushed to Lua) and than tonumber.
-- Every number a script handles is an integer below 2^53, so Lua's doubles are exact;
-- policies that could leave that range are refused when the configuration is loaded.
-- Redis runs a script's whole body on every call, so nothing here builds a table.

local now, cost, extra_ms, min_ttl_ms = struct.unpack('<dddd', ARGV[1])
local lease, period, limits_at = 0, 0, 33
if #ARGV[1] % 40 == 8 then
  lease, period = struct.unpack('<dd', ARGV[1], 33)
  limits_at = 49
end
-- Redis's clock, read on every check: it decides when now_us is -1, it is compared with the
-- deadline, and the reply ends with it (the caller learns Redis's clock from it).
local time = redis.call('TIME')
local clock = tonumber(time[1]) * 1000000 + tonumber(time[2])
if now < 0 then
  now = clock
end
if ARGV[2] and clock > struct.unpack('<d', ARGV[2]) then
  return ''
end
-- A lease's units may be spent until the store's time of the decision plus the period.
local lease_until = now + period
