-- multi_acquire.lua: take several plain mutexes at once, all or none: the
-- members of a multi-lock that live on one Redis node (in one slot, on a
-- Cluster). Each member is an ordinary mutex, taken for an owner of its
-- own, exactly as acquire.lua takes it: a plain Mutex on one of the names
-- excludes the multi-lock, and is excluded by it. lib.lua is prepended;
-- its header describes the keys and the lock hash.
--
-- For member i (from 1): KEYS[8i-7..8i] are its L, F, Q, QT, QI, H, the
-- abandonment mark of its owner, C (Q only looked at, the others unused),
-- and ARGV[3+i] its owner id.
-- ARGV[1]  lease in ms
-- ARGV[2]  how long the fencing counters outlive their last use, in ms
-- ARGV[3]  the holder's 'pid since host' (since: its wall clock in ms),
--          for inspection only
--
-- Every member is checked before any is taken (scripts do not roll back,
-- so a refusal changes nothing). Returns
--   {1, token...}   every member is taken (now, or by an earlier copy of
--                   this request): its tokens, in the members' order
--   {0, i, pttl}    member i is held by another owner (pttl: its remaining
--                   lease), or its owner was abandoned (pttl -2): nothing
--                   taken
--   {-1, i}         member i is in use by another kind of lock

local n = #KEYS / 8
local lease, retention, info = ARGV[1], ARGV[2], ARGV[3]
local taken = {}
for i = 1, n do
  local k = {unpack(KEYS, 8 * i - 7, 8 * i)}
  local owner = ARGV[3 + i]
  local state = redis.call('HMGET', k[1], 'owner', 'kind', 'token')
  if state[1] == owner then
    taken[i] = state[3] -- an earlier copy of this request
  elseif state[2] or (state[1] == false and redis.call('EXISTS', k[3]) == 1) then
    return {-1, i}
  elseif state[1] then
    return {0, i, redis.call('PTTL', k[1])}
  elseif redis.call('GET', k[7]) then
    return {0, i, -2}
  end
end
local out = {1}
for i = 1, n do
  if not taken[i] then
    taken[i] = plain_take({unpack(KEYS, 8 * i - 7, 8 * i)}, retention, ARGV[3 + i], 1, lease, info)
  end
  out[i + 1] = taken[i]
end
return out
