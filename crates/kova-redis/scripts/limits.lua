-- Several limits on one key, decided all or nothing: mirrors kova's Limits
-- (crates/kova/src/limits/cells.rs, decide_all). Needs the prelude and the five algorithms.
-- KEYS[i]  limit i's state key (all with the same hash tag: one cluster slot)
-- ARGV[1]  now in microseconds, or '' to read the server's TIME
-- ARGV[2]  cost (0 = peek), ARGV[3] TTL margin (µs)
-- ARGV     then 3 values per limit: algorithm code (kova's AlgorithmKind::ALL order, from 1) and
--          its two parameters
-- Returns {allowed (1/0)} followed by 4 values per limit: allowed, remaining, retry_after_us,
-- reset_after_us.
-- A cost fits a limit exactly when a peek reports at least that much remaining (for every
-- algorithm), so every limit is peeked first, and only if all fit is any of them charged: a
-- denial writes nothing. Denying limits report their denial, the others their peek.
local DECIDE = {decide_token_bucket, decide_gcra, decide_fixed_window, decide_sliding_window_counter,
  decide_sliding_window_log}
local now
if ARGV[1] == '' then now = server_now() else now = tonumber(ARGV[1]) end
local cost, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
local peeks, fits = {}, true
for i = 1, #KEYS do
  local j = 3 + (i - 1) * 3
  local decide, a, b = DECIDE[tonumber(ARGV[j + 1])], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  peeks[i] = decide(KEYS[i], now, 0, 0, margin, a, b)
  if peeks[i][2] < cost then fits = false end
end
local out = {1}
if not fits then out[1] = 0 end
for i = 1, #KEYS do
  local j = 3 + (i - 1) * 3
  local decide, a, b = DECIDE[tonumber(ARGV[j + 1])], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  local r = peeks[i]
  if cost > 0 and (fits or r[2] < cost) then
    r = decide(KEYS[i], now, cost, 0, margin, a, b)
  end
  for k = 1, 4 do out[#out + 1] = r[k] end
end
return out
