-- GCRA: mirrors kova::Gcra::decide (crates/kova/src/algorithm/gcra.rs) line by line.
-- State: the theoretical arrival time (TAT) in microseconds, a plain integer string. No key = 0.
-- a = interval (microseconds per unit), b = burst.
local function decide_gcra(key, now, cost, extra, margin, interval, burst)
  local capacity = burst * interval          -- <= 2^52, checked by the caller

  local function remaining(deficit)
    if deficit >= capacity then return 0 end
    return idiv(capacity - deficit, interval)
  end

  local tat = tonumber(redis.call('GET', key) or '0')
  -- How far the bucket is from full, as time. Zero when the TAT has passed.
  local deficit = math.max(tat - now, 0)
  if cost == 0 then
    return {1, remaining(deficit), 0, deficit, 0}
  end
  local new_deficit = deficit + cost * interval
  if new_deficit > capacity then
    -- A denial writes nothing.
    return {0, remaining(deficit), new_deficit - capacity, deficit, 0}
  end
  local granted = math.min(extra, remaining(new_deficit))
  new_deficit = new_deficit + granted * interval
  -- The key expires exactly when the bucket is full again (a missing key reads as full).
  redis.call('SET', key, fmt(now + new_deficit), 'PX', ttl_ms(new_deficit + margin))
  return {1, remaining(new_deficit), 0, new_deficit, granted}
end
