-- One decision, by the algorithm bound to `decide` just above (see src/scripts.rs).
-- KEYS[1]  the limit's state key
-- ARGV[1]  now in microseconds, or '' to read the server's TIME
-- ARGV[2]  cost, ARGV[3] extra, ARGV[4] TTL margin (µs), ARGV[5] and ARGV[6] the parameters
local now
if ARGV[1] == '' then now = server_now() else now = tonumber(ARGV[1]) end
return decide(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), tonumber(ARGV[6]))
