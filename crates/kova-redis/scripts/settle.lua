-- Settling (see refund.lua): the real cost of a check once known.
-- KEYS[1]  the limit's state key
-- ARGV[1]  now in microseconds, or '' to read the server's TIME
-- ARGV[2]  algorithm code (1 token bucket, 2 GCRA, 3 fixed window, 4 sliding window counter)
-- ARGV[3]  'refund' or 'charge'
-- ARGV[4]  units, ARGV[5] TTL margin (µs), ARGV[6] and ARGV[7] the parameters, ARGV[8] GCRA's
--          burst + overdraft in units (the others take no debt)
-- Returns {units charged} (0 for a refund).
local now
if ARGV[1] == '' then now = server_now() else now = tonumber(ARGV[1]) end
local code, units, margin = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local a, b = tonumber(ARGV[6]), tonumber(ARGV[7])
if ARGV[3] == 'refund' then
  REFUND[code](KEYS[1], now, units, margin, a, b)
  return {0}
end
if code == 2 then
  return {charge_gcra(KEYS[1], now, units, margin, a, tonumber(ARGV[8]))}
end
return {charge_by_check(DECIDE_WORD[code], KEYS[1], now, units, margin, a, b)}
