-- prelude.lua: shared helpers of the Sluice check script (scripts are concatenated:
-- idiv.lua, prelude, one file per algorithm, then check.lua).
-- Every number a script handles is an integer below 2^53, so Lua's doubles are exact;
-- policies that could leave that range are refused when the configuration is loaded.

-- The time the last judged limit decided at (after its time-never-runs-backwards clamp).
local JUDGED_AT = 0

local NONE = -1   -- retry_after when allowed
local NEVER = -2  -- retry_after when the cost can never be allowed

local function ceil_div(a, b)
  return idiv(a + b - 1, b)
end

local function decision(allowed, limit, remaining, reset_after, retry_after, delay)
  return { allowed, limit, remaining, reset_after, retry_after, delay }
end

-- TTL settings of this call, set by check.lua from ARGV.
local TTL = { extra_ms = 0, min_ms = 1 }

-- The TTL (ms) covering `expires_in` µs of state life, plus the clock skew allowed
-- between servers, and at least the configured floor (for injected-time runs, where a
-- trace's time can run far ahead of Redis's clock).
local function ttl_ms(expires_in)
  local ttl = ceil_div(math.max(expires_in, 0), 1000) + TTL.extra_ms
  return math.max(ttl, TTL.min_ms, 1)
end

-- Stores `value` at `key` with the TTL of `expires_in` µs, in one call.
local function store(key, value, expires_in)
  redis.call('SET', key, value, 'PX', ttl_ms(expires_in))
end

-- The two numbers of a '<dd' state at `key`, or 0, 0 when the key is missing (fresh).
local function get_pair(key)
  local raw = redis.call('GET', key)
  if not raw then
    return 0, 0
  end
  local first, second = struct.unpack('<dd', raw)
  return first, second
end

-- Reads the arguments every check starts with: now_us (-1: read Redis TIME), cost,
-- extra_ms and min_ttl_ms (which set TTL). Returns now and cost.
local function common_args()
  local now = tonumber(ARGV[1])
  if now < 0 then
    local time = redis.call('TIME')
    now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  end
  TTL.extra_ms = tonumber(ARGV[3])
  TTL.min_ms = tonumber(ARGV[4])
  return now, tonumber(ARGV[2])
end

-- The algorithm a single-limit script runs (each algorithm file sets them).
local JUDGE, RECORD
