-- fixed_window.lua: mirror of crates/sluice/src/algorithm/fixed_window.rs (FixedWindow).
-- Change both together.
-- State: a string '<dd' (window start µs, used). Missing key = fresh.
-- Params: p1 = limit N, p2 = window µs, p3 = 1 when anchored, p4 = offset µs.

local function fw_state(key)
  local start, used = get_pair(key)
  return { start = start, used = used }
end

-- The window `now` falls in: start, count already used, end, effective now.
local function fw_current(st, p, now)
  local window, anchored, offset = p[2], p[3] == 1, p[4]
  local live = st.used > 0
  if live and now < st.start then
    now = st.start
  end
  local finish
  if not anchored then
    -- start = floor((now − offset) / window) × window + offset, shifted by one window.
    local shift = window - offset
    finish = idiv(now + shift, window) * window + offset
  elseif live and now < st.start + window then
    finish = st.start + window
  else
    finish = now + window
  end
  local start = math.max(finish - window, 0)
  local used = 0
  if live and st.start == start then
    used = st.used
  end
  return start, used, finish, now
end

local function fw_judge(key, p, now, cost)
  local n = p[1]
  local start, used, finish, now = fw_current(fw_state(key), p, now)
  JUDGED_AT = now
  local reset_after = math.max(finish - now, 0)
  local left = n - used
  local plan = { start = start, used = used + cost, expires_in = reset_after }
  if cost == 0 then
    if left > 0 then
      return decision(1, n, left, reset_after, NONE, 0), nil
    end
    return decision(0, n, 0, reset_after, reset_after, 0), nil
  end
  if cost > n then
    return decision(0, n, left, reset_after, NEVER, 0), nil
  end
  if cost > left then
    return decision(0, n, left, reset_after, reset_after, 0), nil
  end
  return decision(1, n, left - cost, reset_after, NONE, 0), plan
end

local function fw_record(key, p, plan, admitted)
  if admitted and plan then
    store(key, struct.pack('<dd', plan.start, plan.used), plan.expires_in)
  end
end

JUDGE, RECORD = fw_judge, fw_record
