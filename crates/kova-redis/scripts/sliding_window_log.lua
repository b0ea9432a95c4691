-- Sliding window log: mirrors kova::SlidingWindowLog (crates/kova/src/algorithm/sliding_window_log.rs)
-- on a sorted set: one member per admitted unit, scored by its time in microseconds. Exact: no
-- window of length period ever holds more than limit units.
-- Members are "time:n", n numbering the units admitted at the same time, so each is unique.
-- a = limit (<= 2^16, checked by the caller), b = period (microseconds).
local function decide_sliding_window_log(key, now, cost, extra, margin, limit, period)
  -- Keep times non-decreasing even if the clock ran backwards: read at the newest unit's time.
  -- lag: how far the reading is behind it. Units written at that time count until period
  -- after it, lag later than period after the reading PEXPIRE counts from: the TTL adds the
  -- lag, as the other algorithms' do.
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local last = nil
  local lag = 0
  if newest[2] then
    last = tonumber(newest[2])
    if last > now then lag, now = last - now, last end
  end
  -- A unit at time t is inside the window while now - t < period, i.e. t > now - period.
  local inside = '(' .. fmt(now - period)
  local in_window = redis.call('ZCOUNT', key, inside, '+inf')
  -- More units than the limit (admitted under a larger quota of the same key) leave none.
  local remaining = math.max(limit - in_window, 0)
  local reset = 0
  if last then reset = math.max(last + period - now, 0) end

  if cost == 0 then
    return {1, remaining, 0, reset, 0}
  end
  if in_window + cost > limit then
    -- The oldest in_window + cost - limit units must leave first: wait for the last of them.
    -- A denial writes nothing (expired members are only trimmed on admission).
    local must_leave = redis.call('ZRANGEBYSCORE', key, inside, '+inf', 'WITHSCORES', 'LIMIT', in_window + cost - limit - 1, 1)
    return {0, remaining, tonumber(must_leave[2]) + period - now, reset, 0}
  end
  local granted = math.min(extra, remaining - cost)
  local units = cost + granted
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now - period))
  local now_s = fmt(now)
  local base = redis.call('ZCOUNT', key, now_s, now_s)
  local args = {}
  for i = 0, units - 1 do
    args[#args + 1] = now_s
    args[#args + 1] = now_s .. ':' .. fmt(base + i)
    if #args >= 1024 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
  redis.call('PEXPIRE', key, ttl_ms(lag + period + margin))
  return {1, remaining - units, 0, period, granted}
end
