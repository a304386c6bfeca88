-- renew.lua: extend the leases of many locks in one call (the watchdog,
-- and Extend).
--
-- KEYS[i]       a lock hash (all in one cluster slot)
-- ARGV[3i-2]    the owner id expected in KEYS[i]
-- ARGV[3i-1]    the new lease of KEYS[i] in ms
-- ARGV[3i]      the request's sequence number, increasing per owner
--
-- Returns one integer per key:
--   1  renewed (by this request, or by an earlier copy of it: same number)
--   0  not held by that owner, or revoked (revoke.lua): the lease is left
--      untouched, so a lock is never revived
--   2  superseded: a request of the owner with a higher number was applied
--      already, nothing changed. A request that reaches Redis late (its
--      reply was lost and the holder moved on) can never undo a later one,
--      in particular never shorten a lease that a later Extend set.
--
-- The last applied number is the lock hash's 'rseq' field.

local out = {}
for i, key in ipairs(KEYS) do
  local state = redis.call('HMGET', key, 'owner', 'rseq', 'revoked')
  local seq = tonumber(ARGV[3 * i])
  if state[1] ~= ARGV[3 * i - 2] or state[3] then
    out[i] = 0
  elseif state[2] and tonumber(state[2]) >= seq then
    if tonumber(state[2]) == seq then out[i] = 1 else out[i] = 2 end
  else
    redis.call('HSET', key, 'rseq', seq)
    redis.call('PEXPIRE', key, ARGV[3 * i - 1])
    out[i] = 1
  end
end
return out
