-- forceunlock.lua: delete a lock whoever holds it, and tell waiters.
-- For operators; the holder finds out at its next renewal.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  release channel
-- ARGV[2]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
--
-- The message is 'force': every client, including the caller, wakes a waiter.
--
-- Returns 1 if a lock was deleted, 0 if there was none.

if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
if ARGV[2] == 's' then
  redis.call('SPUBLISH', ARGV[1], 'force')
else
  redis.call('PUBLISH', ARGV[1], 'force')
end
return 1
