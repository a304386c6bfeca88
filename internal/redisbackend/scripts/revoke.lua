-- revoke.lua: revoke a lock whoever holds it, without freeing it. Each
-- holder's process is told at once (as by forceunlock.lua), so that its
-- lease context ends within about a round trip, and the holder's
-- renewals are refused from now on; the lock itself stays held until its
-- holders release it, which they do once their work has stopped, or
-- until their current leases run out. So nobody else can take the lock
-- while a revoked holder may still act on it, as long as the holder stops
-- within its lease. lib.lua and queue.lua are prepended; lib.lua's header
-- describes the keys.
--
-- KEYS[1..8]  L, F, Q, QT, QI, H, an abandonment mark (unused), C
-- ARGV[1]  the prefix of the holders' process channels (see tell in
--          queue.lua)
-- ARGV[2]  the lock's name
--
-- A plain or fair mutex or an election is marked with the field
-- 'revoked', which renew.lua refuses; a holder of a read-write lock or a
-- semaphore loses its 's:<owner>' field, without which shared_renew.lua
-- refuses it. Re-entry and release work as before: they are the holder's
-- own business, and a release frees the lock as usual.
--
-- Returns how long the lock may stay held at most, in ms (the longest
-- remaining lease, at least 1), or 0 if it was not held.

local k = KEYS

local state = redis.call('HMGET', k[1], 'owner', 'kind', 'i')
if state[2] == 'rw' or state[2] == 'sem' then
  local now = clock()
  shared_purge(k, now)
  local holders = redis.call('ZRANGE', k[6], 0, -1, 'WITHSCORES')
  local last = 0
  for i = 1, #holders, 2 do
    local owner = holders[i]
    last = math.max(last, tonumber(holders[i + 1]) - now)
    redis.call('HDEL', k[1], 's:' .. owner)
    tell_shared(k, ARGV[1], ARGV[2], owner)
  end
  if #holders == 0 then
    return 0
  end
  return math.max(last, 1)
end
if not state[1] then
  return 0
end
redis.call('HSET', k[1], 'revoked', '1')
local pid, _, host = holder_info(state[3])
if pid then
  tell(ARGV[1], ARGV[2], state[1], host, pid)
end
return math.max(redis.call('PTTL', k[1]), 1)
