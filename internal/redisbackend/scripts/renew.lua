-- renew.lua: extend the leases of many locks in one call (the watchdog,
-- and Extend). lib.lua is prepended (for per_item).
--
-- KEYS[i]       a lock hash (all in one cluster slot)
-- ARGV[3i-2]    the owner id expected in KEYS[i]
-- ARGV[3i-1]    the new lease of KEYS[i] in ms
-- ARGV[3i]      the request's sequence number, increasing per owner
--
-- Returns one reply per key:
--   1  renewed (by this request, or by an earlier copy of it: same number)
--   0  not held by that owner, or revoked (revoke.lua): the lease is left
--      untouched, so a lock is never revived
--   2  superseded: a request of the owner with a higher number was applied
--      already, nothing changed. A request that reaches Redis late (its
--      reply was lost and the holder moved on) can never undo a later one,
--      in particular never shorten a lease that a later Extend set.
--   an error reply: this lock's step failed (a command refused, a key of
--      the wrong type), its outcome is unknown. Each lock's step runs in a
--      pcall of its own, so that the others' are not affected.
--
-- The last applied number is the lock hash's 'rseq' field.

-- renew_one renews lock i and returns its reply.
local function renew_one(i)
  local key = KEYS[i]
  local state = redis.call('HMGET', key, 'owner', 'rseq', 'revoked')
  local seq = tonumber(ARGV[3 * i])
  if state[1] ~= ARGV[3 * i - 2] or state[3] then
    return 0
  elseif state[2] and tonumber(state[2]) >= seq then
    if tonumber(state[2]) == seq then return 1 else return 2 end
  end
  redis.call('HSET', key, 'rseq', seq)
  redis.call('PEXPIRE', key, ARGV[3 * i - 1])
  return 1
end

return per_item(#KEYS, renew_one)
