-- give_back_args.lua: the start of the give-back script (script.rs puts it first, then
-- ttl.lua, idiv.lua, holds.lua, every algorithm file and give_back.lua): its arguments.
-- KEYS[i]  the state key of limit i (the limits of one key share one hash tag)
-- ARGV[1]  little-endian doubles ('<d', integers): now_us (-1: read Redis TIME), leased (the
--          units the lease granted), unspent (those given back), extra_ms, min_ttl_ms (as
--          common.lua's), then per limit i, from byte 41 + 56 (i − 1): debited_in (the start
--          µs of the window or bucket the units were debited in, or the lease's deadline µs
--          where the state holds leases), stamp (the lease answer's: fixed_window.lua), and
--          the limit's wire form as every check sends it: algorithm id, p1, p2, p3, p4.

local now, leased, unspent, extra_ms, min_ttl_ms = struct.unpack('<ddddd', ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
