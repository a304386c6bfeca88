-- release.lua: remove one hold; when it was the last, delete the lock and
-- tell waiters.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  owner id
-- ARGV[2]  hold id, or '0' for every hold of the owner
-- ARGV[3]  release channel
-- ARGV[4]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[5]  the message: the releasing client's id, so that it can ignore
--          its own releases (it hands them over to its waiters directly)
--
-- Returns
--   1   the lock is free now (waiters were notified)
--   2   the hold was removed, other holds of the owner remain
--   0   the lock is not held by this owner (expired, or taken over)
--  -1   the owner holds the lock but not this hold: it was already released
--       (a retried release), nothing changed
--
-- Scripts do not roll back: a command that fails (an ACL that refuses it,
-- say) leaves the writes before it in place. So all checks come first, and
-- the first write decides: when the last hold goes, DEL is that write, and
-- the lock is either untouched or gone.

local state = redis.call('HMGET', KEYS[1], 'owner', 'holds')
if state[1] ~= ARGV[1] then
  return 0
end

if ARGV[2] ~= '0' then
  local hold = 'h:' .. ARGV[1] .. ':' .. ARGV[2]
  if redis.call('HGET', KEYS[1], hold) == false then
    return -1
  end
  if tonumber(state[2]) > 1 then
    redis.call('HDEL', KEYS[1], hold)
    redis.call('HINCRBY', KEYS[1], 'holds', -1)
    return 2
  end
end

redis.call('DEL', KEYS[1])
if ARGV[4] == 's' then
  redis.call('SPUBLISH', ARGV[3], ARGV[5])
else
  redis.call('PUBLISH', ARGV[3], ARGV[5])
end
return 1
