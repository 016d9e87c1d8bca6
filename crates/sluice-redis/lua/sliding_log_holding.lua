-- sliding_log_holding.lua: mirror of crates/sluice-core/src/algorithm/sliding_log/holding.rs:
-- the sliding log's decisions while units are leased out, the ring's entries and the leases
-- logged at their deadlines beside it counted together. Change both together. After
-- sliding_log.lua, whose sl_decide calls sl_holding() for the decision, made on first use
-- (Redis runs a script's whole body, every function definition, on each call; a log that
-- holds no lease, asked none, needs none of these).
-- A decision merges the leases held with the ring, newest first: a rank among
-- all the entries costs a binary search in the ring per lease. `log` is the ring as read:
-- key, raw (a whole log) or nil (a ring), len, head, cap, newest, live (its entries still
-- in the window), and read (the entries read so far, by index).

local judge_holding = nil

sl_holding = function()
  if judge_holding then
    return judge_holding
  end
  -- The logical `index`-th entry, 0 being the oldest, read once per decision: the binary
  -- searches of one decision (one per lease) probe the same entries near their start, each a
  -- GETRANGE in a ring.
  local function sl_log_entry(log, index)
    local entry = log.read[index]
    if entry == nil then
      entry = sl_entry(log.key, log.raw, log.head, log.cap, index)
      log.read[index] = entry
    end
    return entry
  end

  -- Entries of the ring newer than `time`.
  local function sl_ring_newer_than(log, time)
    local lo, hi = 0, log.len
    while lo < hi do
      local mid = lo + math.floor((hi - lo) / 2)
      if sl_log_entry(log, mid) > time then
        hi = mid
      else
        lo = mid + 1
      end
    end
    return log.len - lo
  end

  -- `t + window − now` for the `rank`-th newest entry of the ring (the oldest when it holds
  -- fewer), at least 0.
  local function sl_ring_rank(log, rank, window, now)
    local index = log.len - math.min(rank, log.len)
    return math.max(sl_log_entry(log, index) + window - now, 0)
  end

  -- `t + window − now` for the newest entry counted (ring or lease), or 0 when none is.
  local function sl_merged_reset(log, live, window, now)
    local latest = -1
    if log.live > 0 then
      latest = log.newest
    end
    if #live > 0 and live[1] > latest then
      latest = live[1]
    end
    if latest < 0 then
      return 0
    end
    return math.max(latest + window - now, 0)
  end

  -- `t + window − now` for the `rank`-th newest entry counted (1 = newest): ring entries and
  -- the leases `live` (newest first), or the oldest held when there are fewer.
  local function sl_merged_wait(log, live, rank, window, now)
    local newer_held = 0
    for i = 1, #live, 2 do
      local newer = sl_ring_newer_than(log, live[i]) + newer_held
      if rank <= newer then
        return sl_ring_rank(log, rank - newer_held, window, now)
      end
      if rank <= newer + live[i + 1] then
        return math.max(live[i] + window - now, 0)
      end
      newer_held = newer_held + live[i + 1]
    end
    if log.len == 0 then
      if #live == 0 then
        return 0
      end
      return live[#live - 1] + window - now
    end
    return sl_ring_rank(log, math.max(rank - newer_held, 1), window, now)
  end

  -- The decision for `cost` (and a `lease` of more units, logged at `till`) at `now` on a log
  -- holding the leases `h`: allowed, remaining, reset_after, retry_after (-1 none, -2 never).
  -- Every unit held counts until its deadline has left the window, and the lease is granted
  -- only when it fits with `cost`.
  local function judge(log, h, now, cost, n, window, attempts, lease, till)
    -- The leases not yet out of the window, newest first.
    local live, held = {}, 0
    if h then
      for i = #h - 1, 1, -2 do
        if h[i] + window > now then
          live[#live + 1] = h[i]
          live[#live + 1] = h[i + 1]
          held = held + h[i + 1]
        end
      end
    end
    local counted = log.live + held
    local reset_after = sl_merged_reset(log, live, window, now)
    if cost == 0 then
      if counted < n then
        return 1, n - counted, reset_after, -1
      end
      return 0, 0, reset_after, sl_merged_wait(log, live, n, window, now)
    elseif cost <= n and counted + cost + lease <= n then
      local latest = now
      if lease > 0 and till > now then
        latest = till
      end
      return 1, n - counted - cost - lease, math.max(reset_after, latest + window - now), -1
    elseif attempts ~= 1 then
      if cost > n then
        return 0, math.max(n - counted, 0), reset_after, -2
      end
      return 0, math.max(n - counted, 0), reset_after, sl_merged_wait(log, live, n - cost + 1, window, now)
    end
    reset_after = math.max(reset_after, window)
    if cost > n then
      return 0, 0, reset_after, -2
    end
    -- The attempt itself is logged: `cost` entries stamped `now`, newer than the ring and
    -- older than every lease still ahead.
    local at = 1
    while at <= #live and live[at] > now do
      at = at + 2
    end
    table.insert(live, at, cost)
    table.insert(live, at, now)
    return 0, 0, reset_after, sl_merged_wait(log, live, n - cost + 1, window, now)
  end

  judge_holding = judge
  return judge
end
