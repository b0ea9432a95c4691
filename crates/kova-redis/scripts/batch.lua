-- A batch: checks that waited on one connection at the same time, decided in order in one run,
-- each exactly as it would be alone (a script runs atomically: nothing comes between them).
-- KEYS[i]  item i's state key
-- ARGV[1]  1 when no key appears twice in KEYS, else 0
-- ARGV[2]  the number of distinct limits L, then 4 values per limit: algorithm (1 token bucket,
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
-- GET and a SET per item. MGET reads false both for a missing key and for a key of another
-- type, so the first command on such a key is one that fails on another type (SET ... GET, or
-- GET). When a key appears twice, its later items read what the batch wrote (`stored`).
-- Globals and fields read per item, as locals: a global's lookup costs more than a local's.
local KEYS, ARGV, call = KEYS, ARGV, redis.call
local DECIDE_STATE = {decide_token_bucket_state, decide_gcra_state, decide_fixed_window_state,
  decide_sliding_window_counter_state}
local distinct = ARGV[1] == '1'
local limits = tonumber(ARGV[2])
local decide_of, margin_of, a_of, b_of = {}, {}, {}, {}
local only_strings = true
for l = 1, limits do
  local j = 2 + (l - 1) * 4
  -- nil for the sliding window log, which is kept in a sorted set.
  local decide = DECIDE_STATE[tonumber(ARGV[j + 1])]
  if not decide then only_strings = false end
  decide_of[l] = decide
  margin_of[l], a_of[l], b_of[l] = tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
end
local n = #KEYS
local first_group = 3 + limits * 4

-- value[i]: item i's key as MGET read it (string keys only).
local value
if only_strings then
  value = call('MGET', unpack(KEYS))
else
  local string_keys, position = {}, {}
  local i, j = 0, first_group
  while i < n do
    local string_group = decide_of[tonumber(ARGV[j])] ~= nil
    for _ = 1, tonumber(ARGV[j + 4]) do
      i = i + 1
      if string_group then
        string_keys[#string_keys + 1] = KEYS[i]
        position[#string_keys] = i
      end
    end
    j = j + 5
  end
  value = {}
  if #string_keys > 0 then
    local read = call('MGET', unpack(string_keys))
    for k = 1, #string_keys do value[position[k]] = read[k] end
  end
end
-- With a key twice: stored[key], the key's value as the batch has left it so far (false: none),
-- and checked[key] once a command that fails on another type has run on it.
local stored, checked
if not distinct then
  stored, checked = {}, {}
  for i = n, 1, -1 do
    local v = value[i]
    stored[KEYS[i]] = v or false
    if v then checked[KEYS[i]] = true end
  end
end

local out = {}
local server = nil
-- The next item to decide, its group's first argument and the items left in that group.
local i, j, left = 1, first_group, 0
local l, now, cost, extra, decide, margin, a, b
-- Decides items i .. n; an error leaves i at the item that raised it.
local function decide_from_i()
  while i <= n do
    if left == 0 then
      l, now, cost, extra, left = tonumber(ARGV[j]), ARGV[j + 1], tonumber(ARGV[j + 2]),
        tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
      if now == '' then
        if not server then server = server_now() end
        now = server
      else
        now = tonumber(now)
      end
      decide, margin, a, b = decide_of[l], margin_of[l], a_of[l], b_of[l]
      j = j + 5
    end
    local key = KEYS[i]
    local allowed, remaining, retry, reset, granted
    if decide then
      -- v: the key's value; fresh: no command that fails on another type has run on it yet.
      local v, fresh
      if distinct then
        v = value[i]
        fresh = not v
      else
        v, fresh = stored[key], not checked[key]
      end
      local new, ttl
      allowed, remaining, retry, reset, granted, new, ttl = decide(v, now, cost, extra, margin, a, b)
      if new then
        if fresh then
          -- GET: on a key of another type, an error and no write.
          call('SET', key, new, 'PX', ttl, 'GET')
        else
          call('SET', key, new, 'PX', ttl)
        end
      elseif fresh then
        call('GET', key)
      end
      if not distinct then
        if new then stored[key] = new end
        checked[key] = true
      end
    else
      local r = decide_sliding_window_log(key, now, cost, extra, margin, a, b)
      allowed, remaining, retry, reset, granted = r[1], r[2], r[3], r[4], r[5]
    end
    local o = i * 3
    if remaining < 0 then
      -- Not a decision any script makes; encoded as one, a denial would read as an admission.
      out[o - 2], out[o - 1], out[o] = 0, 0, 0
    elseif allowed == 1 then
      out[o - 2], out[o - 1], out[o] = remaining + 1, reset, granted
    else
      out[o - 2], out[o - 1], out[o] = -(remaining + 1), reset, retry
    end
    left = left - 1
    i = i + 1
  end
end
-- One protected call for the whole batch, and one more after each item that fails.
while i <= n do
  if not pcall(decide_from_i) then
    local o = i * 3
    out[o - 2], out[o - 1], out[o] = 0, 0, 0
    left = left - 1
    i = i + 1
  end
end
return out
