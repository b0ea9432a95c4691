-- GCRA: mirrors kova::Gcra::decide (crates/kova/src/algorithm/gcra.rs) line by line.
-- State: the theoretical arrival time (TAT) in microseconds, a plain integer string. No key = 0.
-- a = interval (microseconds per unit), b = burst.

-- Whole units left when the bucket is `deficit` from full.
local function gcra_remaining(deficit, capacity, interval)
  if deficit >= capacity then return 0 end
  return idiv(capacity - deficit, interval)
end

-- The decision on the key's stored value `state` (false: no key), and what to write (see the
-- prelude).
local function decide_gcra_state(state, now, cost, extra, margin, interval, burst)
  local capacity = burst * interval          -- <= 2^52, checked by the caller
  local tat = 0                              -- no key: a full bucket
  if state then tat = tonumber(state) end
  -- How far the bucket is from full, as time. Zero when the TAT has passed.
  local deficit = tat - now
  if deficit < 0 then deficit = 0 end
  if cost == 0 then
    return 1, gcra_remaining(deficit, capacity, interval), 0, deficit, 0
  end
  local new_deficit = deficit + cost * interval
  if new_deficit > capacity then
    -- A denial writes nothing.
    return 0, gcra_remaining(deficit, capacity, interval), new_deficit - capacity, deficit, 0
  end
  local granted = 0
  if extra > 0 then
    granted = gcra_remaining(new_deficit, capacity, interval)
    if extra < granted then granted = extra end
    new_deficit = new_deficit + granted * interval
  end
  -- The key expires exactly when the bucket is full again (a missing key reads as full).
  return 1, gcra_remaining(new_deficit, capacity, interval), 0, new_deficit, granted,
    fmt(now + new_deficit), ttl_ms(new_deficit + margin)
end

local function decide_gcra(key, now, cost, extra, margin, interval, burst)
  return decide_key(decide_gcra_state, key, now, cost, extra, margin, interval, burst)
end
