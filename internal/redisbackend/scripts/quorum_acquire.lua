-- quorum_acquire.lua: take a plain mutex on one node of a Redlock quorum,
-- with the fencing token that the client proposes for every node. lib.lua
-- is prepended (not queue.lua); its header describes the lock hash.
--
-- A node takes the lock only with a token above its fencing counter, and
-- makes that token its counter in the same step. So a later holder, which
-- takes the lock on some node where the earlier one had it (two
-- majorities meet), had to propose a token above the earlier one's there:
-- tokens increase per name across holders of the quorum (see
-- internal/redlock).
--
-- KEYS[1..4]  as acquire.lua: L, F, Q (only looked at), this owner's
--             abandonment mark
-- ARGV[1]  owner id
-- ARGV[2]  hold id
-- ARGV[3]  lease in ms
-- ARGV[4]  how long the fencing counter outlives its last use, in ms
-- ARGV[5]  the holder's 'pid since host' (since: its wall clock in ms),
--          for inspection only
-- ARGV[6]  the proposed token
--
-- Returns {1, token, holds} when the owner holds the lock after the call
-- with the proposed token (an owner that already holds it with a lower
-- token, from an earlier proposal of the same attempt, is raised to it;
-- one with a higher token keeps it), {0, pttl} with the current holder's
-- remaining lease in ms ({0, -2} for an abandoned owner), {-1} when the
-- name belongs to another kind, or {-2, counter} when the token is not
-- above the fencing counter: nothing changed, propose a higher one.

local proposed = tonumber(ARGV[6])

-- take takes the free lock, if the token is above the counter.
local function take()
  local counter = redis.call('GET', KEYS[2]) or '0'
  if tonumber(counter) >= proposed then
    return {-2, counter}
  end
  return {1, plain_take(KEYS, ARGV[4], ARGV[1], ARGV[2], ARGV[3], ARGV[5], proposed), 1}
end

-- The usual case, first: free, no queue, the owner not abandoned.
if redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[4]) == 0 then
  return take()
end

local state = redis.call('HMGET', KEYS[1], 'owner', 'kind', 'token', 'holds')
local owner = state[1]

if owner == ARGV[1] then
  local token = tonumber(state[3])
  if proposed > token then
    token = proposed
    redis.call('HSET', KEYS[1], 'token', int(token))
    if proposed > tonumber(redis.call('GET', KEYS[2]) or '0') then
      redis.call('SET', KEYS[2], int(token), 'PX', ARGV[4])
    end
  end
  return {1, int(token), tonumber(state[4])}
end

if state[2] or (owner == false and redis.call('EXISTS', KEYS[3]) == 1) then
  return {-1}
end

if owner then
  return {0, redis.call('PTTL', KEYS[1])}
end

if redis.call('EXISTS', KEYS[4]) == 1 then
  return {0, -2}
end
return take()
