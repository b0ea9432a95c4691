-- A batch: checks that waited on one connection at the same time, decided in order in one run,
-- each exactly as it would be alone (a script runs atomically: nothing comes between them).
-- KEYS[i]  item i's state key
-- ARGV     7 values per item: algorithm (1 token bucket, 2 GCRA, 3 fixed window, 4 sliding
--          window counter, 5 sliding window log: kova's AlgorithmKind::ALL order), now in
--          microseconds or '' for the server's TIME (read once per batch: items without a
--          client time are decided at one instant), cost, extra, TTL margin, the two parameters.
-- Returns 5 values per item, as one decision does; an item whose decision raised an error
-- (for example a key of another type) returns {-1, 0, 0, 0, 0} and the others are unaffected.
local DECIDE = {decide_token_bucket, decide_gcra, decide_fixed_window, decide_sliding_window_counter,
  decide_sliding_window_log}
local out = {}
local server = nil
for i = 1, #KEYS do
  local j = (i - 1) * 7
  local now = ARGV[j + 2]
  if now == '' then
    if not server then server = server_now() end
    now = server
  else
    now = tonumber(now)
  end
  local ok, r = pcall(DECIDE[tonumber(ARGV[j + 1])], KEYS[i], now, tonumber(ARGV[j + 3]),
    tonumber(ARGV[j + 4]), tonumber(ARGV[j + 5]), tonumber(ARGV[j + 6]), tonumber(ARGV[j + 7]))
  if not ok then r = {-1, 0, 0, 0, 0} end
  for k = 1, 5 do out[#out + 1] = r[k] end
end
return out
