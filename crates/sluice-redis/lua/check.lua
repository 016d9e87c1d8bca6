-- check.lua: one decision for one key against L limits, all or nothing (docs/semantics.md), in one
-- round trip. Mirror of crates/sluice/src/store/memory.rs (MemoryStore::check_now).
-- KEYS[i]  the state key of limit i, all sharing one hash tag (one Cluster slot)
-- ARGV     now_us (-1: read Redis TIME), cost, extra_ms (added to every TTL), min_ttl_ms,
--          L, then per limit: algorithm name, p1, p2, p3, p4
-- returns  '<d' × (1 + 7 L): now_us, then per limit: allowed (0|1), limit, remaining,
--          reset_after_us, retry_after_us (-1 none, -2 never), delay_us, judged_at_us
--          (integers, as doubles; judged_at is later than now_us when the state's time was later)

-- The sliding log's functions take and return plain values (its lean script builds no
-- tables); these two give them the judge/record shape of the other algorithms.
local function sl_judge_limit(key, p, now, cost)
  local plan = { cost, sl_judge(key, p[1], p[2], p[3] == 1, now, cost) }
  JUDGED_AT = plan[6]
  return decision(plan[2], p[1], plan[3], plan[4], plan[5], 0), plan
end

local function sl_record_limit(key, p, plan, admitted)
  -- plan: cost, allowed, remaining, reset_after, retry_after, judged_at, then sl_judge's
  -- state values (some may be nil).
  sl_record(key, p[1], p[3] == 1, ttl_ms(p[2]), admitted, plan[1], plan[6], plan[7], plan[8], plan[9],
    plan[10], plan[11], plan[12])
end

local ALGORITHMS = {
  sliding_log = { sl_judge_limit, sl_record_limit },
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

local reply = { struct.pack('<d', now) }
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
  local d = decisions[i]
  reply[i + 1] = struct.pack('<ddddddd', d[1], d[2], d[3], d[4], d[5], d[6], d[7])
end
return table.concat(reply)
