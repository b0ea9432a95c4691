-- Fixed window: mirrors kova::FixedWindow::decide (crates/kova/src/algorithm/fixed_window.rs).
-- State: "window:count", the window index (now / period, full width) and its count. No key = an
-- empty window. a = limit, b = period (microseconds).

-- How many windows behind the stored window a reading may be and still count in it (a clock
-- running backwards), as kova::FixedWindow's BACKWARD_TOLERANCE.
local FIXED_WINDOW_BACKWARD_WINDOWS = 65536

-- The decision on the key's stored value `state` (false: no key), and what to write (see the
-- prelude).
local function decide_fixed_window_state(state, now, cost, extra, margin, limit, period)
  -- current: the window now counts in, its count, and the index of the window after it.
  local index = idiv(now, period)
  local window, count, end_index = index, 0, index + 1
  if state then
    local sep = string.find(state, ':', 1, true)
    local stored = tonumber(string.sub(state, 1, sep - 1))
    -- A count above the limit (written under a larger quota of the same key) reads as a full
    -- window.
    local stored_count = math.min(tonumber(string.sub(state, sep + 1)), limit)
    if stored_count == 0 then
      -- Empty: whatever its window, it counts nothing.
    elseif stored == index then
      count = stored_count
    elseif stored > index and stored - index <= FIXED_WINDOW_BACKWARD_WINDOWS then
      -- The clock is behind the stored window: count in the stored window (never a fresh count).
      window, count, end_index = stored, stored_count, stored + 1
    end
    -- Further ahead, the index is another period's (a quota of the same key with a shorter
    -- one), not a clock running backwards: the window is fresh, as in memory.
  end
  local until_end = end_index * period - now
  local reset = 0
  if count > 0 then reset = until_end end

  if cost == 0 then
    return 1, limit - count, 0, reset, 0
  end
  if count + cost > limit then
    -- A denial writes nothing. cost <= limit, so the next window admits it.
    return 0, limit - count, until_end, reset, 0
  end
  local granted = limit - count - cost
  if extra < granted then granted = extra end
  count = count + cost + granted
  return 1, limit - count, 0, until_end, granted, fmt(window) .. ':' .. fmt_count(count), ttl_ms(until_end + margin)
end

local function decide_fixed_window(key, now, cost, extra, margin, limit, period)
  return decide_key(decide_fixed_window_state, key, now, cost, extra, margin, limit, period)
end
