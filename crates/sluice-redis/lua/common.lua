-- common.lua: the start of every check script (script.rs puts it first): the arguments every
-- check shares and the one TTL formula. Then come idiv.lua when an algorithm divides, the
-- algorithm files, and a driver (single.lua for one limit, check.lua for several).
-- KEYS[i]  the state key of limit i (several limits share one hash tag: one Cluster slot)
-- ARGV[2]  optional: the deadline, one little-endian double: Redis TIME (µs) past which the
--          check writes nothing and replies with an empty string (store/deadline.rs: the
--          caller stopped waiting, and answered by its failure mode)
-- ARGV[1]  one layout for every script: little-endian doubles ('<d', integers) now_us (-1:
--          read Redis TIME), cost, extra_ms (added to every TTL: the clock skew allowed),
--          min_ttl_ms, then per limit i, from byte 33 + 40 (i − 1): algorithm id (check.lua's
--          ALGORITHMS), p1, p2, p3, p4. One packed argument costs Redis far less than 4 + 5 L
--          separate ones (each is parsed, allocated and pushed to Lua) and than tonumber.
-- Every number a script handles is an integer below 2^53, so Lua's doubles are exact;
-- policies that could leave that range are refused when the configuration is loaded.
-- Redis runs a script's whole body on every call, so nothing here builds a table.

local now, cost, extra_ms, min_ttl_ms = struct.unpack('<dddd', ARGV[1])
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

-- The TTL (ms) of a state that returns to fresh in `expires_in` µs (the memory store's
-- expires_at − now): rounded up to whole ms, plus the clock skew allowed between servers,
-- at least the floor (for injected-time runs, where a trace's time can run far ahead of
-- Redis's clock; script.rs sends a floor of at least 1, as PX 0 is an error). Comparisons,
-- not math.max, and no idiv (the sliding log's script has none): this runs on every write.
local function ttl_ms(expires_in)
  local ttl = extra_ms
  if expires_in > 0 then
    -- Exact for integers 0 < expires_in < 2^53: a quotient that is not an integer exceeds
    -- one by at least 1/1000, over half the spacing of doubles there, so never rounds onto it.
    ttl = ttl + math.ceil(expires_in / 1000)
  end
  if ttl < min_ttl_ms then
    return min_ttl_ms
  end
  return ttl
end

