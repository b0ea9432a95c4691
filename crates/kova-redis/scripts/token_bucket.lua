-- Token bucket: mirrors kova::TokenBucket::decide (crates/kova/src/algorithm/token_bucket.rs).
-- State: "tokens:stamp", the token count and the time of the last refill in microseconds (full
-- width: no wrap-around, so any reading behind the stamp is a clock running backwards). No key
-- = a full bucket. a = interval (microseconds per token), b = burst.

-- Microseconds until `t` tokens become a full bucket, `progress` of the next one earned.
local function token_bucket_until_full(t, burst, interval, progress)
  if t >= burst then return 0 end
  local left = (burst - t) * interval - progress
  if left < 0 then return 0 end
  return left
end

-- The decision on the key's stored value `state` (false: no key), and what to write (see the
-- prelude).
local function decide_token_bucket_state(state, now, cost, extra, margin, interval, burst)
  local tokens, stamp = burst, 0
  if state then
    local sep = string.find(state, ':', 1, true)
    tokens = tonumber(string.sub(state, 1, sep - 1))
    stamp = tonumber(string.sub(state, sep + 1))
  end

  -- refill: (tokens, stamp, progress), progress = the part of the next token already earned
  -- (negative when the clock is behind the stamp). A full bucket has its stamp at now.
  local progress
  if tokens >= burst then
    tokens, stamp, progress = burst, now, 0
  elseif stamp > now then
    progress = now - stamp
  else
    local elapsed = now - stamp
    local earned = idiv(elapsed, interval)
    if earned >= burst - tokens then
      tokens, stamp, progress = burst, now, 0
    else
      tokens, stamp, progress = tokens + earned, stamp + earned * interval, elapsed - earned * interval
    end
  end

  if cost == 0 then
    return 1, tokens, 0, token_bucket_until_full(tokens, burst, interval, progress), 0
  end
  if cost > tokens then
    -- A denial writes nothing.
    return 0, tokens, (cost - tokens) * interval - progress,
      token_bucket_until_full(tokens, burst, interval, progress), 0
  end
  local granted = tokens - cost
  if extra < granted then granted = extra end
  local left = tokens - cost - granted
  local until_full = token_bucket_until_full(left, burst, interval, progress)
  return 1, left, 0, until_full, granted, fmt_count(left) .. ':' .. fmt(stamp), ttl_ms(until_full + margin)
end

local function decide_token_bucket(key, now, cost, extra, margin, interval, burst)
  return decide_key(decide_token_bucket_state, key, now, cost, extra, margin, interval, burst)
end
