-- forceunlock.lua: delete a lock whoever holds it (every holder of a
-- shared lock); a fair mutex or a shared lock goes to the first in its
-- queue, a plain mutex's waiters are told, and so is each holder's
-- process. lib.lua and queue.lua are prepended; lib.lua's header describes
-- the keys.
--
-- KEYS[1..8]  L, F, Q, QT, QI, H, an abandonment mark (unused), C
-- ARGV[1]  release channel
-- ARGV[2]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[3]  how long the fencing counter outlives its last use, in ms
-- ARGV[4]  the prefix of the holders' process channels (see tell in
--          queue.lua): each holder's lease context ends without waiting
--          for its next renewal to find the lock gone
-- ARGV[5]  the lock's name
--
-- The release message is 'force': every client, including the caller,
-- wakes a waiter.
--
-- Returns 1 if a lock was deleted, 0 if there was none.

local k = KEYS

local state = redis.call('HMGET', k[1], 'owner', 'kind', 'i')
if state[2] == 'rw' or state[2] == 'sem' then
  local now = clock()
  shared_purge(k, now)
  local holders = redis.call('ZRANGE', k[6], 0, -1)
  for _, owner in ipairs(holders) do
    tell_shared(k, ARGV[4], ARGV[5], owner)
  end
  redis.call('DEL', k[1], k[6])
  settle(k, ARGV[3], ARGV[2], now)
  return #holders > 0 and 1 or 0
end
if not state[1] then
  return 0
end
free(k, state[2], ARGV[3], ARGV[1], ARGV[2], 'force')
local pid, _, host = holder_info(state[3])
if pid then
  tell(ARGV[4], ARGV[5], state[1], host, pid)
end
return 1
