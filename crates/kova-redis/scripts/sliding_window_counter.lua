-- Sliding window counter: mirrors kova::SlidingWindowCounter::decide
-- (crates/kova/src/algorithm/sliding_window_counter.rs). Estimate = floor(prev * (1 -
-- elapsed/period)) + current, in integers: the previous window's count weighted by the share of
-- it still in the sliding window, rounded down.
-- State: "window:prev:current". No key = both counts zero.
-- a = limit, b = period (microseconds); limit * period <= 2^52, checked by the caller, so every
-- product below stays under 2^53 (exact in a double, and in idiv).

-- floor(prev * (period - elapsed) / period).
local function counter_weighted(prev, period, elapsed)
  if prev == 0 then return 0 end
  return idiv(prev * (period - elapsed), period)
end

-- The elapsed time (from a window's start) from which `prev`, weighted, is at most `room`:
-- prev * (period - e) < (room + 1) * period.
local function counter_weighted_at_most(prev, period, room)
  if prev == 0 then return 0 end
  return period - math.min(idiv((room + 1) * period - 1, prev), period)
end

local function counter_remaining(c, limit, period, prev, elapsed)
  return math.max(limit - c - counter_weighted(prev, period, elapsed), 0)
end

-- Microseconds (from the view's instant) until the limit is back to full: `c` and the previous
-- window's weighted count both zero.
local function counter_until_fresh(c, period, prev, elapsed)
  if c > 0 then return (period - elapsed) + counter_weighted_at_most(c, period, 0) end
  return math.max(counter_weighted_at_most(prev, period, 0) - elapsed, 0)
end

-- How many windows behind the stored window a reading may be and still be read at its start (a
-- clock running backwards), as kova::SlidingWindowCounter's BACKWARD_TOLERANCE.
local COUNTER_BACKWARD_WINDOWS = 256

-- The decision on the key's stored value `state` (false: no key), and what to write (see the
-- prelude).
local function decide_sliding_window_counter_state(state, now, cost, extra, margin, limit, period)
  -- view: the state as seen at now.
  local index = idiv(now, period)
  local elapsed = now - index * period
  local window, prev, current, lag = index, 0, 0, 0
  if state then
    local a = string.find(state, ':', 1, true)
    local b = string.find(state, ':', a + 1, true)
    local stored = tonumber(string.sub(state, 1, a - 1))
    local stored_prev = tonumber(string.sub(state, a + 1, b - 1))
    local stored_current = tonumber(string.sub(state, b + 1))
    local ahead = index - stored
    if stored_prev == 0 and stored_current == 0 then
      -- Empty: whatever its window, it counts nothing.
    elseif ahead == 0 then
      prev, current = stored_prev, stored_current
    elseif ahead == 1 then
      prev, current = stored_current, 0
    elseif ahead < 0 and -ahead <= COUNTER_BACKWARD_WINDOWS then
      -- The clock is behind the stored window: read it at the stored window's start (the
      -- strictest point of it); durations are then longer by the lag.
      window, prev, current, lag, elapsed = stored, stored_prev, stored_current, -ahead * period - elapsed, 0
    end
    -- Two or more windows on, both counts have aged out. Further behind than the tolerance,
    -- the index is another period's (a quota of the same key with a shorter one), not a clock
    -- running backwards: fresh, as in memory.
  end

  local reset = counter_until_fresh(current, period, prev, elapsed) + lag
  if cost == 0 then
    return 1, counter_remaining(current, limit, period, prev, elapsed), 0, reset, 0
  end
  if current + cost + counter_weighted(prev, period, elapsed) > limit then
    -- until_fits: microseconds until cost fits, with no other traffic. A denial writes nothing.
    local retry
    local room_now = limit - current - cost
    if room_now >= 0 then
      -- Fits this window once the previous count, weighted, is at most room_now.
      retry = math.max(counter_weighted_at_most(prev, period, room_now) - elapsed, 0)
    else
      -- Next window: prev' = current, weighted at most limit - cost.
      retry = (period - elapsed) + counter_weighted_at_most(current, period, limit - cost)
    end
    return 0, counter_remaining(current, limit, period, prev, elapsed), retry + lag, reset, 0
  end
  local granted = counter_remaining(current + cost, limit, period, prev, elapsed)
  if extra < granted then granted = extra end
  current = current + cost + granted
  local new_reset = counter_until_fresh(current, period, prev, elapsed) + lag
  return 1, counter_remaining(current, limit, period, prev, elapsed), 0, new_reset, granted,
    fmt(window) .. ':' .. fmt_count(prev) .. ':' .. fmt_count(current), ttl_ms(new_reset + margin)
end

local function decide_sliding_window_counter(key, now, cost, extra, margin, limit, period)
  return decide_key(decide_sliding_window_counter_state, key, now, cost, extra, margin, limit, period)
end
