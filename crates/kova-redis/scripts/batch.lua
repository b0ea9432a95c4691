-- A batch: checks that waited on one connection at the same time, decided in order in one run,
-- each exactly as it would be alone (a script runs atomically: nothing comes between them).
-- KEYS[i]  item i's state key
-- ARGV[1]  the number of distinct limits L, then 4 values per limit: algorithm (1 token bucket,
--          2 GCRA, 3 fixed window, 4 sliding window counter, 5 sliding window log: kova's
--          AlgorithmKind::ALL order), TTL margin, the two parameters
-- then     groups of consecutive items that share all of their limit (1..L), now (microseconds,
--          or '' for the server's TIME, read once per batch: items without a client time are
--          decided at one instant), cost and extra: 5 values per group, those four and the
--          number of items in it. Every Redis argument and reply value costs the server more
--          than the arithmetic of a decision, so a batch of like checks sends little beyond keys.
-- Returns 3 values per item: remaining + 1 when allowed, -(remaining + 1) when denied, 0 when
-- its decision raised an error (for example on a key of another type; the others are
-- unaffected); the reset time; and the extra units granted when allowed, the retry time when
-- denied (a lone decision's retry time is 0 when allowed, its grant 0 when denied).
--
-- The string keys are read with one MGET and written with one SET each (an admission), not a
-- GET and a SET per item: a key checked twice in a batch is read from what the batch wrote.
local DECIDE_STATE = {decide_token_bucket_state, decide_gcra_state, decide_fixed_window_state,
  decide_sliding_window_counter_state}
local limits = tonumber(ARGV[1])
local decide_of, margin_of, a_of, b_of = {}, {}, {}, {}
for l = 1, limits do
  local j = 1 + (l - 1) * 4
  -- nil for the sliding window log, which is kept in a sorted set.
  decide_of[l] = DECIDE_STATE[tonumber(ARGV[j + 1])]
  margin_of[l], a_of[l], b_of[l] = tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
end
local n = #KEYS

-- Per item: its group; per group: its limit, now, cost and extra.
local group_of, limit_of = {}, {}
local g_now, g_cost, g_extra = {}, {}, {}
local string_keys = {}
local i, j, g = 0, 2 + limits * 4, 0
while i < n do
  g = g + 1
  local l = tonumber(ARGV[j])
  g_now[g], g_cost[g], g_extra[g] = ARGV[j + 1], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  for _ = 1, tonumber(ARGV[j + 4]) do
    i = i + 1
    group_of[i], limit_of[i] = g, l
    if decide_of[l] then string_keys[#string_keys + 1] = KEYS[i] end
  end
  j = j + 5
end
-- stored[key]: the key's value as the batch has left it so far (false: none). MGET reads false
-- both for a missing key and for a key of another type: such a key stays `unverified` until a
-- command that fails on another type (SET ... GET, or GET) has run on it.
local stored, unverified = {}, {}
if #string_keys > 0 then
  local values = redis.call('MGET', unpack(string_keys))
  for k = 1, #string_keys do
    local key = string_keys[k]
    stored[key] = values[k]
    if not values[k] then unverified[key] = true end
  end
end

local out = {}
local server = nil
i = 0
-- Decides items i + 1 .. n; an error leaves i at the item that raised it.
local function decide_from_next()
  while i < n do
    i = i + 1
    local key, l, g = KEYS[i], limit_of[i], group_of[i]
    local now = g_now[g]
    if now == '' then
      if not server then server = server_now() end
      now = server
    else
      now = tonumber(now)
    end
    local decide_state = decide_of[l]
    local allowed, remaining, retry, reset, granted
    if decide_state then
      local new, ttl
      allowed, remaining, retry, reset, granted, new, ttl =
        decide_state(stored[key], now, g_cost[g], g_extra[g], margin_of[l], a_of[l], b_of[l])
      if new then
        if unverified[key] then
          -- GET: on a key of another type, an error and no write.
          redis.call('SET', key, new, 'PX', ttl, 'GET')
          unverified[key] = nil
        else
          redis.call('SET', key, new, 'PX', ttl)
        end
        stored[key] = new
      elseif unverified[key] then
        redis.call('GET', key)
        unverified[key] = nil
      end
    else
      local r = decide_sliding_window_log(key, now, g_cost[g], g_extra[g], margin_of[l], a_of[l], b_of[l])
      allowed, remaining, retry, reset, granted = r[1], r[2], r[3], r[4], r[5]
    end
    local o = (i - 1) * 3
    if allowed == 1 then
      out[o + 1], out[o + 2], out[o + 3] = remaining + 1, reset, granted
    else
      out[o + 1], out[o + 2], out[o + 3] = -(remaining + 1), reset, retry
    end
  end
end
-- One protected call for the whole batch, and one more after each item that fails.
while i < n do
  if not pcall(decide_from_next) then
    local o = (i - 1) * 3
    out[o + 1], out[o + 2], out[o + 3] = 0, 0, 0
  end
end
return out
