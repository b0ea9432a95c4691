-- Reservations: mirrors kova's RateLimiter::reserve_n_within and Reservation::cancel
-- (crates/kova/src/reservation.rs), Go's x/time/rate Reserve and Cancel. Needs the prelude, the
-- word algorithms and refund.lua before it.
-- KEYS[1]  the limit's state key
-- ARGV[1]  now in microseconds, or '' to read the server's TIME
-- ARGV[2]  algorithm code (1 token bucket, 2 GCRA, 3 fixed window, 4 sliding window counter)
-- ARGV[3]  'reserve' or 'cancel'
-- ARGV[4]  cost, ARGV[5] TTL margin (µs), ARGV[6] and ARGV[7] the parameters
-- reserve: ARGV[8] the longest delay accepted (µs, at most 2^52). Returns {code, µs, mark, now}:
--   {1, delay, mark, now} reserved (mark: for GCRA the TAT it stored, for the others the first
--   52 bits of the SHA-1 of the state it left, which tell whether anything came after it);
--   {0, delay, 0, now} refused, the delay is longer than accepted (nothing taken);
--   {2, retry_after, 0, now} refused, not available now (an algorithm other than GCRA).
-- cancel: ARGV[8] when the units were to be ready (µs), ARGV[9] the mark. Returns {units given
--   back}: kova's WordAlgorithm::cancel_reservation rule, the whole cost when the state is still
--   the one the reservation left, nothing otherwise or once the units are due.
local now
if ARGV[1] == '' then now = server_now() else now = tonumber(ARGV[1]) end
local key, code, cost, margin = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local a, b = tonumber(ARGV[6]), tonumber(ARGV[7])

-- The mark of an immediate reservation: the state it left, hashed to an exact integer.
local function state_mark(key)
  return tonumber(string.sub(redis.sha1hex(redis.call('GET', key) or ''), 1, 13), 16)
end

if ARGV[3] == 'cancel' then
  if now > tonumber(ARGV[8]) or cost == 0 then return {0} end
  local mark = tonumber(ARGV[9])
  if code == 2 then
    local tat = tonumber(redis.call('GET', key) or '0')
    -- Granted after it and still counted: nothing back.
    if tat > mark then return {0} end
    -- A TAT short of the mark was moved back by a refund since: that part counts as given.
    cost = cost - math.min(idiv(mark - tat + a - 1, a), cost)
  elseif state_mark(key) ~= mark then
    return {0}
  end
  if cost > 0 then REFUND[code](key, now, cost, margin, a, b) end
  return {cost}
end

local max_delay = tonumber(ARGV[8])
if code == 2 then
  local interval, capacity = a, a * b
  local tat = tonumber(redis.call('GET', key) or '0')
  if cost == 0 then return {1, 0, tat, now} end
  -- The TAT moves out by cost intervals whatever it is.
  local new_deficit = math.max(tat - now, 0) + cost * interval
  local delay = math.max(new_deficit - capacity, 0)
  if delay > max_delay then return {0, delay, 0, now} end
  redis.call('SET', key, fmt(now + new_deficit), 'PX', ttl_ms(new_deficit + margin))
  return {1, delay, now + new_deficit, now}
end
if cost == 0 then return {1, 0, 0, now} end
-- The other algorithms cannot hold units ahead of time: a reservation is a check.
local r = DECIDE_WORD[code](key, now, cost, 0, margin, a, b)
if r[1] == 1 then return {1, 0, state_mark(key), now} end
return {2, r[3], 0, now}
