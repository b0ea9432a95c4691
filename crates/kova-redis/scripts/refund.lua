-- Giving units back, and charging them whatever the state: mirrors the refund and charge of
-- kova's word algorithms (crates/kova/src/algorithm/*.rs, `WordAlgorithm::refund` and
-- `WordAlgorithm::charge`), for settling a cost and cancelling a reservation. Needs the prelude
-- and the four word algorithms' decide functions before it. Costs are at most the capacity
-- (refunds) or burst + overdraft (charges), clamped by the caller (src/settle.rs), so every
-- product below stays at most 2^52.
-- Every refund_<algorithm>(key, now, cost, margin, a, b) writes the refunded state (or nothing
-- when nothing comes back) and returns nothing.

local function refund_gcra(key, now, cost, margin, interval, burst)
  local tat = tonumber(redis.call('GET', key) or '0')
  -- A TAT at or before now already means full: never refund past that.
  local new_tat = math.max(tat - cost * interval, math.min(now, tat))
  if new_tat == tat then return end
  if new_tat <= now then
    -- Full from now on: the same as no key (a missing key reads as full).
    redis.call('DEL', key)
  else
    redis.call('SET', key, fmt(new_tat), 'PX', ttl_ms(new_tat - now + margin))
  end
end

local function refund_token_bucket(key, now, cost, margin, interval, burst)
  local state = redis.call('GET', key)
  if not state then return end
  local sep = string.find(state, ':', 1, true)
  local tokens = tonumber(string.sub(state, 1, sep - 1))
  local stamp = tonumber(string.sub(state, sep + 1))
  -- The refill of decide_token_bucket.
  if tokens >= burst then return end
  if stamp <= now then
    local earned = idiv(now - stamp, interval)
    if earned >= burst - tokens then return end
    tokens, stamp = tokens + earned, stamp + earned * interval
  end
  if cost == 0 then return end
  tokens = math.min(tokens + cost, burst)
  if tokens >= burst then
    redis.call('DEL', key)
    return
  end
  local until_full = math.max((burst - tokens) * interval - (now - stamp), 0)
  redis.call('SET', key, fmt(tokens) .. ':' .. fmt(stamp), 'PX', ttl_ms(until_full + margin))
end

local function refund_fixed_window(key, now, cost, margin, limit, period)
  local state = redis.call('GET', key)
  if not state or cost == 0 then return end
  local sep = string.find(state, ':', 1, true)
  local stored = tonumber(string.sub(state, 1, sep - 1))
  local count = tonumber(string.sub(state, sep + 1))
  -- Only the window the charge went into (or one the clock is behind) still counts it.
  if stored < idiv(now, period) or count == 0 then return end
  count = count - math.min(cost, count)
  redis.call('SET', key, fmt(stored) .. ':' .. fmt(count), 'PX', ttl_ms((stored + 1) * period - now + margin))
end

local function refund_sliding_window_counter(key, now, cost, margin, limit, period)
  local state = redis.call('GET', key)
  if not state or cost == 0 then return end
  local a = string.find(state, ':', 1, true)
  local b = string.find(state, ':', a + 1, true)
  local stored = tonumber(string.sub(state, 1, a - 1))
  local prev = tonumber(string.sub(state, a + 1, b - 1))
  local current = tonumber(string.sub(state, b + 1))
  local index = idiv(now, period)
  local window, elapsed, lag = stored, now - index * period, 0
  if index <= stored then
    -- Still the window the charge went into (or the clock is behind it, read at its start).
    if index < stored then elapsed, lag = 0, (stored - index) * period - (now - index * period) end
    if prev == 0 and current == 0 then return end
    current = current - math.min(cost, current)
  elseif index == stored + 1 and current > 0 then
    -- One window on: the charge now weighs in as the previous window's count.
    window, prev, current = index, current - math.min(cost, current), 0
  else
    return
  end
  local reset = counter_until_fresh(current, period, prev, elapsed)
  if reset + lag == 0 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, fmt(window) .. ':' .. fmt(prev) .. ':' .. fmt(current), 'PX', ttl_ms(reset + lag + margin))
  end
end

-- GCRA's charge: up to cost units while the deficit stays within debt_units intervals
-- (burst + overdraft). Returns the units charged.
local function charge_gcra(key, now, cost, margin, interval, debt_units)
  local tat = tonumber(redis.call('GET', key) or '0')
  local deficit = math.max(tat - now, 0)
  local debt_limit = debt_units * interval
  local room = 0
  if debt_limit > deficit then room = idiv(debt_limit - deficit, interval) end
  local take = math.min(cost, room)
  if take == 0 then return 0 end
  local new_deficit = deficit + take * interval
  redis.call('SET', key, fmt(now + new_deficit), 'PX', ttl_ms(new_deficit + margin))
  return take
end

-- The other algorithms' charge: what a peek reports remaining, at most cost (no debt).
local function charge_by_check(decide, key, now, cost, margin, a, b)
  local take = math.min(cost, decide(key, now, 0, 0, margin, a, b)[2])
  if take <= 0 then return 0 end
  if decide(key, now, take, 0, margin, a, b)[1] == 1 then return take end
  return 0
end

-- By algorithm code (kova's AlgorithmKind::ALL order; the log takes no refunds).
local REFUND = {refund_token_bucket, refund_gcra, refund_fixed_window, refund_sliding_window_counter}
local DECIDE_WORD = {decide_token_bucket, decide_gcra, decide_fixed_window, decide_sliding_window_counter}
