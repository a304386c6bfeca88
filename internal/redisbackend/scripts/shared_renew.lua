-- shared_renew.lua: extend the leases of many holders of shared locks
-- (read-write locks and semaphores) in one call (the watchdog, and Extend).
-- lib.lua and queue.lua are prepended; lib.lua's header describes the lock
-- hash and the holders.
--
-- For holder i (from 1), in one cluster slot:
-- KEYS[3i-2]    the lock hash L
-- KEYS[3i-1]    its holders H
-- KEYS[3i]      its capacity C, if it is a semaphore: C is made to outlive
--               the new lease (see capacity_ttl in queue.lua)
-- ARGV[3i-2]    the owner id
-- ARGV[3i-1]    the new lease in ms
-- ARGV[3i]      the request's sequence number, increasing per owner
--
-- Returns one reply per holder, as renew.lua: 1 renewed (by this request
-- or an earlier copy), 0 not held by that owner (its lease ended, or it
-- released): nothing changed, so a lease is never revived; 2 superseded by
-- a request of the owner with a higher number, nothing changed; an error
-- reply if this holder's step failed (its outcome is unknown; the others'
-- are not affected).

-- renew_one renews holder i and returns its reply.
local function renew_one(i, now)
  local k = {KEYS[3 * i - 2], nil, nil, nil, nil, KEYS[3 * i - 1], nil, KEYS[3 * i]}
  local owner, lease, seq = ARGV[3 * i - 2], tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i])
  local ends = redis.call('ZSCORE', k[6], owner)
  local last = redis.call('HGET', k[1], 's:' .. owner)
  if not ends or tonumber(ends) <= now or not last then
    return 0
  elseif tonumber(last) >= seq then
    if tonumber(last) == seq then return 1 else return 2 end
  end
  redis.call('HSET', k[1], 's:' .. owner, seq)
  redis.call('ZADD', k[6], int(now + lease), owner)
  shared_ttl(k, now)
  outlive(k[8], lease)
  return 1
end

return per_item(#KEYS / 3, renew_one, clock())
