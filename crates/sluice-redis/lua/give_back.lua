-- give_back.lua: takes a lease's unspent units back (docs/leases.md); the mirror of
-- FixedWindow::give_back and SlidingWindow::give_back in crates/sluice-core. The module
-- writes the same layouts (fixed_window.lua, sliding_window.lua), so this runs on both.
-- KEYS: one state key per limit. ARGV[1] = units; then per limit six values: the start µs
-- of the window or bucket the units were debited in, then the limit's wire form as every
-- check sends it (crates/sluice-core/src/policy/wire.rs): the algorithm's number and
-- p1..p4. Only the algorithms a lease is granted for take units back (2 fixed window;
-- 3 sliding window: p2 the bucket width µs, p3 the buckets B, p4 bit 2 an anchored grid);
-- the others have nothing to take back.
-- A state that no longer counts that window or bucket is left alone, and a counter keeps
-- at least one unit (the lease's first unit was spent there). SETRANGE keeps the TTL.
local units = tonumber(ARGV[1])

local function fixed_window(key, raw, start)
  local begun, used = struct.unpack('<dd', raw)
  if begun == start and used > 0 then
    redis.call('SETRANGE', key, 8, struct.pack('<d', math.max(used - units, 1)))
  end
end

local function sliding_window(key, raw, start, w, b, anchored)
  local slots = b + 1
  local newest = (struct.unpack('<d', raw))
  local anchor = 0
  if anchored == 1 then
    anchor = (struct.unpack('<d', raw, 9 + 8 * slots))
  end
  local offset = start - anchor
  if offset < 0 or offset % w ~= 0 then
    return
  end
  local bucket = offset / w
  if bucket > newest or newest - bucket >= slots then
    return
  end
  local at = 9 + 8 * (bucket % slots)
  local count = (struct.unpack('<d', raw, at))
  if count > 0 then
    redis.call('SETRANGE', key, at - 1, struct.pack('<d', math.max(count - units, 1)))
  end
end

local FIXED_WINDOW, SLIDING_WINDOW = 2, 3

for i, key in ipairs(KEYS) do
  local base = 1 + (i - 1) * 6
  local start, algorithm = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  local raw = redis.call('GET', key)
  if raw and algorithm == FIXED_WINDOW then
    fixed_window(key, raw, start)
  elseif raw and algorithm == SLIDING_WINDOW then
    local flags = tonumber(ARGV[base + 6])
    local anchored = 0
    if flags >= 2 then
      anchored = 1
    end
    sliding_window(key, raw, start, tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5]), anchored)
  end
end
return 0
