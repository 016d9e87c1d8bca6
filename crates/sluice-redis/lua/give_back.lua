-- give_back.lua: takes a lease's unspent units back (docs/leases.md), under every limit the
-- lease was debited under: each algorithm's give-back, the mirror of its `give_back` in
-- crates/sluice-core (Algorithm::give_back), and of the module's SLUICE.GIVEBACK; then the
-- driver. Change them together. script.rs puts it last, after give_back_args.lua and every
-- algorithm file, whose functions these use (kept out of the algorithm files, which every
-- check runs whole).
-- A window takes units back only into the state of the lease's stamp, and only while it
-- still counts the window or bucket they were debited in (never its last unit: the lease's
-- first unit was spent there). A state holding leases finds the lease by its deadline and
-- size. A limit listed twice is one state: it takes the units back once.
-- returns  an empty string

-- Takes a lease's `unspent` units out of the lease held until `deadline`
-- (SlidingLog::give_back): the spent ones stay logged there.
local function sl_give_back(key, now, deadline, leased, unspent, n, window)
  local raw, len, head, cap, newest, oldest, h = sl_read(key, n)
  if not holds().take(h, deadline, leased, unspent) then
    return
  end
  h = holds().clear_ended(h)
  local expires_in = 0
  if len > 0 or h then
    local latest = holds().last(h) or 0
    if len > 0 then
      latest = math.max(latest, newest)
    end
    expires_in = latest + window - now
  end
  local ttl = ttl_ms(expires_in)
  if raw then
    redis.call('SET', key, string.sub(raw, 1, 8 * len) .. (h and holds().pack(h, true) or ''), 'PX', ttl)
    return
  end
  if h then
    redis.call('SETRANGE', key, SL_HEADER + 8 * cap, holds().pack(h))
  end
  redis.call('SETRANGE', key, '0', struct.pack('<ddI4I4I4I4', newest, oldest, len, head, cap, h and #h / 2 or 0))
  redis.call('PEXPIRE', key, ttl)
end

-- Takes `units` back into the window starting at `start`, when the state of `stamp` still
-- counts it (FixedWindow::give_back): never its last unit. SETRANGE keeps the TTL.
local function fw_give_back(key, raw, start, stamp, units)
  local begun, used, held = fw_read(raw)
  if held ~= stamp or begun ~= start or used == 0 then
    return
  end
  redis.call('SETRANGE', key, 8, struct.pack('<d', math.max(used - units, 1)))
end

-- Takes `units` back into the bucket starting at `start`, when the state of `stamp` still
-- counts it (SlidingWindow::give_back): never its last unit. SETRANGE keeps the TTL.
local function sw_give_back(key, raw, start, stamp, units, w, b, flags)
  local slots = b + 1
  local st, held = sw_state(raw, slots, flags >= 2)
  if held ~= stamp then
    return
  end
  local offset = start - st.anchor
  if offset < 0 or offset % w ~= 0 then
    return
  end
  local bucket = offset / w
  if bucket > st.newest or st.newest - bucket >= slots then
    return
  end
  local count = st.counts[bucket % slots]
  if count == 0 then
    return
  end
  redis.call('SETRANGE', key, 8 * (bucket % slots + 1), struct.pack('<d', math.max(count - units, 1)))
end

-- Takes back the lease held until `deadline` (TokenBucket::give_back): the bucket refilled
-- to `now`, the lease's `unspent` units credited (never above C less the units still held).
local function tb_give_back(key, raw, now, deadline, leased, unspent, c, amount, interval)
  local taken, last, h = tb_read(raw)
  local tokens, at
  tokens, last, at = tb_refilled(taken, last, h, now, c, amount, interval)
  taken = c - tokens
  holds().drop_ended(h, at)
  if holds().take(h, deadline, leased, leased) then
    local cap = c - math.min(holds().live(h, at), c)
    taken = c - math.min(tokens + unspent, cap)
  end
  if taken == 0 and h and #h == 0 then
    h = holds().clear_ended(h)
  end
  tb_write(key, c, amount, interval, taken, last, h, at)
end

-- Takes back the lease held until `deadline` (LeakyBucket::give_back): its spent units,
-- `leased − unspent`, folded in as spent at `now`.
local function lb_give_back(key, raw, now, deadline, leased, unspent, interval)
  local arrival, h = lb_read(raw)
  arrival = lb_folded(arrival, h, now, interval)
  holds().drop_ended(h, now)
  if holds().take(h, deadline, leased, leased) then
    arrival = math.max(arrival, now) + math.max(leased - unspent, 0) * interval
  end
  lb_write(key, interval, arrival, holds().clear_ended(h), now)
end

-- By algorithm id, as check.lua's ALGORITHMS.
local SLIDING_LOG, FIXED_WINDOW, SLIDING_WINDOW, TOKEN_BUCKET, LEAKY_BUCKET = 1, 2, 3, 4, 5

for i, key in ipairs(KEYS) do
  local listed = false
  for k = 1, i - 1 do
    listed = listed or KEYS[k] == key
  end
  local at, stamp, id, p1, p2, p3, p4 = struct.unpack('<ddddddd', ARGV[1], 41 + 56 * (i - 1))
  local raw = nil
  if not listed and id ~= SLIDING_LOG then
    raw = redis.call('GET', key)
  end
  if listed then
    -- Taken back once, at its first listing.
  elseif id == SLIDING_LOG then
    sl_give_back(key, now, at, leased, unspent, p1, p2)
  elseif raw and id == FIXED_WINDOW then
    fw_give_back(key, raw, at, stamp, unspent)
  elseif raw and id == SLIDING_WINDOW then
    sw_give_back(key, raw, at, stamp, unspent, p2, p3, p4)
  elseif raw and id == TOKEN_BUCKET then
    tb_give_back(key, raw, now, at, leased, unspent, p1, p2, p3)
  elseif raw and id == LEAKY_BUCKET then
    lb_give_back(key, raw, now, at, leased, unspent, p1)
  end
end
return ''
