-- kova prelude: prepended to every script (see src/scripts.rs); then the five algorithms, each a
-- local function decide_<algorithm>(key, now, cost, extra, margin, a, b), and one epilogue: one
-- decision (single.lua) or a batch of them (batch.lua).
--
-- Lua numbers are doubles. Every value handled here is an integer below 2^53, where doubles are
-- exact: times and durations in whole microseconds below 2^52, products checked below 2^53 by the
-- Rust side (crate::limit) before any call. Integer division (idiv) rounds the quotient once,
-- which cannot reach the next integer there.
--
-- Every decide_<algorithm> takes
--   key     the limit's state key: prefix:{tag}:algorithm
--   now     microseconds
--   cost    units (0 = peek)
--   extra   units wanted for a local lease (granted only if cost is admitted)
--   margin  TTL margin in microseconds (added to every key's TTL)
--   a, b    the algorithm's two parameters
-- and returns {allowed (1/0), remaining, retry_after_us, reset_after_us, granted_extra}.
--
-- Every algorithm kept in a string key (all but the sliding window log) has its decision as a
-- function of the stored value, decide_<algorithm>_state(state, now, cost, extra, margin, a, b),
-- `state` being the key's value or false when there is none. It reads and writes no key, and
-- returns the five values above as plain values, then the value to store and its PX TTL when the
-- decision writes (nothing more when it does not); decide_<algorithm> is it between a GET and a
-- SET, and the batch script reads all its keys with one MGET instead.

-- Library functions called per decision, as locals: a global's lookup costs more than the call.
local format = string.format

-- floor(a / b), exact for 0 <= a < 2^53 and b > 0. a / b is k + r/b (0 <= r < b), and its
-- rounding moves it by at most (a / b) * 2^-53 < 1 / b: never down past k (exact when r = 0),
-- never up to k + 1. q % 1 (q - floor(q)) is exact. No C call (math.fmod): it costs more than
-- the division.
local function idiv(a, b)
  local q = a / b
  return q - q % 1
end

-- fmt(x): an integer as a decimal string (tostring prints %.14g). %d formats a C long: exact
-- below 2^53 where it has 64 bits, and much cheaper than %.0f, which a 32-bit build keeps.
local INTEGER_FORMAT = '%.0f'
if string.format('%d', 2^53 - 1) == '9007199254740991' then INTEGER_FORMAT = '%d' end
-- fmt and ttl_ms each keep the last integer they formatted: like checks of new keys in one batch
-- write the same state and the same TTL, and a comparison costs far less than a format.
local last_integer, last_string = nil, nil
local function fmt(x)
  if x ~= last_integer then
    last_integer, last_string = x, format(INTEGER_FORMAT, x)
  end
  return last_string
end

-- fmt_count(x): a count of units (a bucket's tokens, a window's admissions) as a decimal string.
-- Checks of one batch write few distinct counts, between a window or time stamp formatted by fmt:
-- each count is formatted once per call and then looked up, and fmt keeps the stamp.
local count_strings
local function fmt_count(x)
  if not count_strings then count_strings = {} end
  local s = count_strings[x]
  if not s then
    s = format(INTEGER_FORMAT, x)
    count_strings[x] = s
  end
  return s
end

-- A PEXPIRE/PX argument: microseconds rounded UP to ms. A reset time plus the TTL margin can pass
-- 2^53 µs (both are below 2^52): the TTL is capped below it (285 years), so the sum stays exact;
-- no decision reads a TTL.
local MAX_TTL_US = 9007199254739992       -- 2^53 - 1000
local last_ttl_us, last_ttl = nil, nil
local function ttl_ms(us)
  if us ~= last_ttl_us then
    last_ttl_us = us
    if us > MAX_TTL_US then us = MAX_TTL_US end
    last_ttl = format(INTEGER_FORMAT, idiv(us + 999, 1000))
  end
  return last_ttl
end

local function server_now()               -- Redis TIME in microseconds
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- One decision on `key` by a decide_<algorithm>_state function: GET, decide, SET if it writes.
local function decide_key(decide_state, key, now, cost, extra, margin, a, b)
  local allowed, remaining, retry, reset, granted, new, ttl =
    decide_state(redis.call('GET', key), now, cost, extra, margin, a, b)
  if new then redis.call('SET', key, new, 'PX', ttl) end
  return {allowed, remaining, retry, reset, granted}
end
