-- holds.lua: the leases a state holds apart, the twin of crates/sluice-core/src/algorithm/holds.rs
-- (Holds). Change both together. In the scripts of the algorithms that hold leases (the
-- sliding log and the buckets) and in the give-back script, after common.lua.
-- A list is nil (clear: nothing held, nothing ended) or a table of pairs, oldest deadline
-- first: h[2i − 1] the deadline µs of lease i, h[2i] its units; h.ended is the token
-- bucket's mark (held units ended since the bucket was last full with nothing held).
-- Each algorithm stores the pairs as '<dd' (deadline, units) beside its state.
-- The functions are made on first use (`holds()`), not on every call: Redis runs a script's
-- whole body, every function definition, on each call, and a check of a state that holds
-- no lease, asking none, needs none of them.

local loaded_holds = nil

-- The functions below, as the fields of one table.
local function holds()
  if loaded_holds then
    return loaded_holds
  end
  local MAX_HOLDS = 16
  local H = {}

  -- The `k` pairs stored in `raw` from byte `at`, with the mark `ended`.
  function H.read(raw, at, k, ended)
    if k == 0 and not ended then
      return nil
    end
    local h = { ended = ended }
    for i = 0, k - 1 do
      h[2 * i + 1], h[2 * i + 2] = struct.unpack('<dd', raw, at + 16 * i)
    end
    return h
  end

  -- The pairs of `h`, as stored ('' for none); then, when `counted`, −k, k being their
  -- number (how a whole sliding log ends).
  function H.pack(h, counted)
    if h == nil or #h == 0 then
      return ''
    end
    local parts = {}
    for i = 1, #h, 2 do
      parts[#parts + 1] = struct.pack('<dd', h[i], h[i + 1])
    end
    if counted then
      parts[#parts + 1] = struct.pack('<d', -#h / 2)
    end
    return table.concat(parts)
  end

  -- The units, and the number, of the leases whose deadline is after `now`: still spendable.
  function H.held(h, now)
    local units, held = 0, 0
    if h then
      for i = 1, #h, 2 do
        if h[i] > now then
          units, held = units + h[i + 1], held + 1
        end
      end
    end
    return units, held
  end

  -- Units of the leases whose deadline is after `now`.
  function H.live(h, now)
    return (H.held(h, now))
  end

  -- True when one more lease fits at `now` (leases ended by then make room).
  function H.room(h, now)
    local _, held = H.held(h, now)
    return held < MAX_HOLDS
  end

  -- Drops the leases whose deadline is at or before `t` (the oldest ones); returns how many.
  function H.drop_until(h, t)
    if h == nil then
      return 0
    end
    local pairs_held, dropped = #h / 2, 0
    while dropped < pairs_held and h[2 * dropped + 1] <= t do
      dropped = dropped + 1
    end
    if dropped > 0 then
      for i = 1, 2 * (pairs_held - dropped) do
        h[i] = h[i + 2 * dropped]
      end
      for i = 2 * pairs_held, 2 * (pairs_held - dropped) + 1, -1 do
        h[i] = nil
      end
    end
    return dropped
  end

  -- Takes out the leases whose deadline is at or before `t`: their pairs, oldest first
  -- (Holds::take_until).
  function H.take_until(h, t)
    local taken = {}
    while h and #taken < #h and h[#taken + 1] <= t do
      taken[#taken + 1], taken[#taken + 2] = h[#taken + 1], h[#taken + 2]
    end
    H.drop_until(h, t)
    return taken
  end

  -- nil when `h` holds nothing and is not marked (Holds::tidy).
  function H.tidy(h)
    if h and #h == 0 and not h.ended then
      return nil
    end
    return h
  end

  -- Drops the leases ended by `now`; marks the list when any did (Holds::drop_ended).
  function H.drop_ended(h, now)
    if H.drop_until(h, now) > 0 then
      h.ended = true
    end
  end

  -- Forgets the mark (Holds::clear_ended): nil when nothing is held then.
  function H.clear_ended(h)
    if h then
      h.ended = false
    end
    return H.tidy(h)
  end

  -- `h` with a lease of `units` ending at `deadline` (merged with one of the same deadline).
  function H.add(h, deadline, units)
    if units == 0 then
      return h
    end
    h = h or { ended = false }
    local i = 1
    while i <= #h and h[i] < deadline do
      i = i + 2
    end
    if h[i] == deadline then
      h[i + 1] = h[i + 1] + units
    else
      table.insert(h, i, units)
      table.insert(h, i, deadline)
    end
    return h
  end

  -- H.add, then, while more than MAX_HOLDS are held, the oldest lease's units move to the
  -- next one's deadline (Holds::add_merging_oldest): counted as spent later than they were,
  -- which the sliding log, counting held units until their deadline passes, may always do.
  function H.add_merging_oldest(h, deadline, units)
    h = H.add(h, deadline, units)
    while h and #h > 2 * MAX_HOLDS do
      h[4] = h[4] + h[2]
      table.remove(h, 1)
      table.remove(h, 1)
    end
    return h
  end

  -- Takes `units` out of the lease held under `deadline` when it holds at least `leased`;
  -- marks the list. False when it is not held (Holds::take).
  function H.take(h, deadline, leased, units)
    if h == nil then
      return false
    end
    for i = 1, #h, 2 do
      if h[i] == deadline then
        if h[i + 1] < math.max(leased, units) then
          return false
        end
        h[i + 1] = h[i + 1] - units
        if h[i + 1] == 0 then
          table.remove(h, i)
          table.remove(h, i)
        end
        h.ended = true
        return true
      end
    end
    return false
  end

  -- The latest deadline held, or nil.
  function H.last(h)
    if h and #h > 0 then
      return h[#h - 1]
    end
    return nil
  end

  loaded_holds = H
  return H
end
