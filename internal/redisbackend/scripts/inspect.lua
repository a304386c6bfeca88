-- inspect.lua: read a lock's state in one consistent step.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the fencing counter
--
-- Returns {owner, token, holds, host, pid, since, pttl, last token}; the
-- first six are false when the lock is free, the last is false when the
-- counter has expired.

local f = redis.call('HMGET', KEYS[1], 'owner', 'token', 'holds', 'host', 'pid', 'since')
f[7] = redis.call('PTTL', KEYS[1])
f[8] = redis.call('GET', KEYS[2])
return f
