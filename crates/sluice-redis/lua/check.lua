-- check.lua: one decision for one key against L limits, all or nothing (SPEC.md), in one
-- round trip. Mirror of crates/sluice/src/store/memory.rs (MemoryStore::check_now).
-- KEYS[i]  the state key of limit i, all sharing one hash tag (one Cluster slot)
-- ARGV     now_us (-1: read Redis TIME), cost, extra_ms (added to every TTL), min_ttl_ms,
--          L, then per limit: algorithm name, p1, p2, p3, p4
-- returns  {now_us, then per limit: allowed (0|1), limit, remaining, reset_after_us,
--          retry_after_us (-1 none, -2 never), delay_us, judged_at_us}  (integers only;
--          judged_at is later than now_us when the state's time was later)

local ALGORITHMS = {
  sliding_log = { sl_judge, sl_record },
  fixed_window = { fw_judge, fw_record },
  sliding_window = { sw_judge, sw_record },
  token_bucket = { tb_judge, tb_record },
  leaky_bucket = { lb_judge, lb_record },
}

local now, cost = common_args()
local count = tonumber(ARGV[5])

local limits, decisions, plans = {}, {}, {}
local admitted = true
for i = 1, count do
  local base = 6 + (i - 1) * 5
  local algorithm = ALGORITHMS[ARGV[base]]
  if algorithm == nil then
    return redis.error_reply('sluice: unknown algorithm ' .. tostring(ARGV[base]))
  end
  local params = { tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4]) }
  limits[i] = { algorithm = algorithm, params = params }
  decisions[i], plans[i] = algorithm[1](KEYS[i], params, now, cost)
  decisions[i][7] = JUDGED_AT
  admitted = admitted and decisions[i][1] == 1
end

local reply = { now }
for i = 1, count do
  -- A limit listed twice is one state: record the request once.
  local first = true
  for k = 1, i - 1 do
    if KEYS[k] == KEYS[i] then
      first = false
    end
  end
  if first then
    limits[i].algorithm[2](KEYS[i], limits[i].params, plans[i], admitted)
  end
  for _, value in ipairs(decisions[i]) do
    reply[#reply + 1] = value
  end
end
return reply
