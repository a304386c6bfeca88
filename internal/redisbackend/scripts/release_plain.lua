-- release_plain.lua: remove one hold of the owner of a plain mutex, or all
-- of them; when the owner has none left the lock is free and its waiters
-- are told. release.lua does the same for every kind; this one is for a
-- plain mutex's owner, which needs neither the queue nor the holders of a
-- shared lock, so it takes one key and runs without queue.lua. lib.lua is
-- prepended; its header describes the lock hash.
--
-- KEYS[1]  L, the lock hash
-- ARGV[1]  owner id
-- ARGV[2]  hold id, or '0' for every hold of the owner
-- ARGV[3]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[4]  the message: the releasing client's id, so that it can ignore
--          its own releases (it hands them over to its waiters directly)
--
-- Returns
--   1   that was the owner's last hold: the lock is free
--   2   the hold was removed, other holds of the owner remain
--   0   the lock is not held by this owner (expired, or taken over)
--  -1   the owner holds the lock but not this hold: it was already released
--       (a retried release), nothing changed
--
-- As in release.lua, all checks come first and the first write decides:
-- when the last hold goes, DEL is that write.

local owner, hold = ARGV[1], ARGV[2]
local state = redis.call('HMGET', KEYS[1], 'owner', 'holds', 'h:' .. owner .. ':' .. hold)
if state[1] ~= owner then
  return 0
end
if hold ~= '0' then
  if not state[3] then
    return -1
  end
  if tonumber(state[2]) > 1 then
    redis.call('HDEL', KEYS[1], 'h:' .. owner .. ':' .. hold)
    redis.call('HINCRBY', KEYS[1], 'holds', -1)
    return 2
  end
end
redis.call('DEL', KEYS[1])
publish(KEYS[1] .. ':released', ARGV[3], ARGV[4]) -- the release channel (Keys.Channel)
return 1
