-- acquire.lua: take a plain mutex, or add a hold to a lock this owner
-- already has (the re-entry of a fair mutex comes here too). lib.lua is
-- prepended (not queue.lua); its header describes the lock hash.
--
-- KEYS[1]  L, the lock hash
-- KEYS[2]  F, the fencing counter
-- KEYS[3]  Q, the queue of a fair or read-write lock (only looked at: a
--          name with a queue is in use by a queued kind)
-- KEYS[4]  the abandonment mark of this owner  {name}:abandoned:<owner>
--          (see abandon.lua): while it exists, this owner never takes the
--          lock, so an acquisition that reaches Redis after its attempt
--          was given up takes nothing
-- ARGV[1]  owner id (128 random bits per acquisition, hex)
-- ARGV[2]  hold id (unique within the owner)
-- ARGV[3]  lease in ms
-- ARGV[4]  how long the fencing counter outlives its last use, in ms
-- ARGV[5]  the holder's 'pid since host' (since: its wall clock in ms),
--          for inspection only
-- ARGV[6]  '1' to re-enter only: never take a free lock (the owner's
--          earlier hold must still be there)
--
-- Returns {1, token, holds} when the owner holds the lock after the call,
-- {0, pttl} with the current holder's remaining lease in ms, or {-1} when
-- the name belongs to another kind (a fair mutex or a read-write lock,
-- held or with a queue): kinds never mix, and that lock is left untouched.

-- The common case first: nothing of the name exists (no holder, no queue)
-- and the owner was not abandoned.
if ARGV[6] ~= '1' and redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4]) == 0 then
  return {1, plain_take(KEYS, ARGV[4], ARGV[1], ARGV[2], ARGV[3], ARGV[5]), 1}
end

local state = redis.call('HMGET', KEYS[1], 'owner', 'kind')
local owner = state[1]

if owner == ARGV[1] then
  -- Re-entry. The lease is left alone: the first hold's renewal owns it.
  local holds
  if redis.call('HSETNX', KEYS[1], 'h:' .. ARGV[1] .. ':' .. ARGV[2], 1) == 1 then
    holds = redis.call('HINCRBY', KEYS[1], 'holds', 1)
  else
    holds = tonumber(redis.call('HGET', KEYS[1], 'holds'))
  end
  return {1, redis.call('HGET', KEYS[1], 'token'), holds}
end

if ARGV[6] == '1' then
  return {0, redis.call('PTTL', KEYS[1])}
end

if state[2] or (owner == false and redis.call('EXISTS', KEYS[3]) == 1) then
  return {-1}
end

if owner == false then
  if redis.call('EXISTS', KEYS[4]) == 1 then
    return {0, -2}
  end
  return {1, plain_take(KEYS, ARGV[4], ARGV[1], ARGV[2], ARGV[3], ARGV[5]), 1}
end

return {0, redis.call('PTTL', KEYS[1])}
