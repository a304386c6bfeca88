-- sem_permits.lua: set a semaphore's capacity (for operators). Growing it
-- grants the waiters at the head of the queue whose permits now fit, at
-- once; shrinking it revokes nothing: holders keep their permits, and new
-- acquisitions wait until the permits held fall low enough. Every waiter
-- that asks for more permits than the new capacity loses its place (it
-- could never be granted), wherever it is in the queue: at its next
-- refresh it asks again and is refused. The capacity lasts the fence
-- retention, and as long as its holders and waiters (capacity_ttl).
-- lib.lua and queue.lua are prepended; lib.lua's header describes the keys.
--
-- KEYS[1..8]  L, F, Q, QT, QI, H, an abandonment mark (unused), C
-- ARGV[1]  the new capacity
-- ARGV[2]  how long the fencing counter and the capacity outlive their
--          last use, in ms
-- ARGV[3]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
--
-- Returns {the capacity before (0 if it had expired), the permits held}.
-- It refuses ({-1}) a name in use by another kind.

local k = KEYS
local now = clock()
purge_places(k, now)
local kind = redis.call('HGET', k[1], 'kind')
local _, queued = head(k)
if kind and kind ~= 'sem' or not kind and redis.call('EXISTS', k[1]) == 1 or queued and queued ~= 's' then
  return {-1}
end
local before = tonumber(redis.call('GET', k[8]) or '0')
redis.call('SET', k[8], ARGV[1], 'PX', ARGV[2])
capacity_ttl(k, now, ARGV[2])
drop_oversized(k, tonumber(ARGV[1]))
settle(k, ARGV[2], ARGV[3], now)
return {before, tonumber(redis.call('HGET', k[1], 'used') or '0')}
