-- check.lua: the driver for several limits: one decision for one key against L limits, all
-- or nothing (docs/semantics.md), in one round trip. Mirror of
-- crates/sluice-core/src/store/memory.rs (MemoryStore::check_and_lease_now): a lease
-- (common.lua) is decided with the request under every limit, and when it does not fit
-- them all, the request alone, in this one call. script.rs puts it after common.lua and
-- every algorithm file; single.lua is the lean driver for one limit.
-- returns  '<d' × (1 + 7 L): now_us, then per limit: allowed (0|1), limit, remaining,
--          reset_after_us, retry_after_us (-1 none, -2 never), delay_us, judged_at_us
--          (integers, as doubles; judged_at is later than now_us when the state's time was
--          later, -1 when the answer does not age with the clock), then, only when a lease
--          was asked, granted (0|1) and per limit the state's stamp (fixed_window.lua; 0 for
--          the others), then Redis TIME (µs); an empty string when the deadline had passed
--          (common.lua)

-- By algorithm id: the core's wire number (`Policy::WIRE_ALGORITHMS`, 1-based), in this order
-- (a test in script.rs holds it).
local ALGORITHMS = {
  { sl_decide, sl_record },
  { fw_decide, fw_record },
  { sw_decide, sw_record },
  { tb_decide, tb_record },
  { lb_decide, lb_record },
}

-- Every limit decided for `cost` and `units` leased until `till`, changing nothing: per
-- limit, its algorithm, parameters, and what its `decide` returned (7 decision values,
-- then the plan its `record` takes); and whether every limit allowed it.
local function decide_all(units, till)
  local limits, admitted = {}, true
  for i = 1, #KEYS do
    local id, p1, p2, p3, p4 = struct.unpack('<ddddd', ARGV[1], limits_at + 40 * (i - 1))
    local algorithm = ALGORITHMS[id]
    if algorithm == nil then
      return nil, id
    end
    local decided = { algorithm[1](KEYS[i], now, cost, p1, p2, p3, p4, units, till) }
    limits[i] = { record = algorithm[2], params = { p1, p2, p3, p4 }, decided = decided }
    admitted = admitted and decided[1] == 1
  end
  return limits, admitted
end

local limits, admitted
local granted = 0
if lease > 0 and cost > 0 then
  limits, admitted = decide_all(lease, lease_until)
  if admitted == true then
    granted = 1
  end
end
if granted == 0 then
  limits, admitted = decide_all(0, 0)
end
if limits == nil then
  return redis.error_reply('sluice: unknown algorithm id ' .. admitted)
end

-- Then record them all, or none (a plan has at most 11 values: the sliding log's).
local reply, stamps = { struct.pack('<d', now) }, {}
for i, limit in ipairs(limits) do
  -- A limit listed twice is one state: record the request once.
  local first = nil
  for k = 1, i - 1 do
    if first == nil and KEYS[k] == KEYS[i] then
      first = k
    end
  end
  if first == nil then
    local p = limit.params
    stamps[i] = limit.record(KEYS[i], admitted, p[1], p[2], p[3], p[4], unpack(limit.decided, 8, 18))
  else
    stamps[i] = stamps[first]
  end
  reply[i + 1] = struct.pack('<ddddddd', unpack(limit.decided, 1, 7))
end
if lease > 0 then
  reply[#reply + 1] = struct.pack('<d', granted)
  for i = 1, #limits do
    reply[#reply + 1] = struct.pack('<d', stamps[i] * granted)
  end
end
reply[#reply + 1] = struct.pack('<d', clock)
return table.concat(reply)
