-- give_back.lua: takes a lease's unspent units back (docs/leases.md); the mirror of
-- FixedWindow::give_back and SlidingWindow::give_back in crates/sluice-core. The module
-- writes the same layouts (fixed_window.lua, sliding_window.lua), so this runs on both.
-- KEYS: one state key per limit. ARGV[1] = units; then per limit five values: kind
-- (1 fixed window, 2 sliding window), the start µs of the window or bucket the units were
-- debited in, the bucket width µs, the buckets B, and 1 when the grid is anchored.
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

for i, key in ipairs(KEYS) do
  local base = 1 + (i - 1) * 5
  local kind, start = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
  local raw = redis.call('GET', key)
  if raw and kind == 1 then
    fixed_window(key, raw, start)
  elseif raw and kind == 2 then
    sliding_window(key, raw, start, tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5]))
  end
end
return 0
