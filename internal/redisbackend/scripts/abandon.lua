-- abandon.lua: give up an owner for good. The engine runs it for every
-- acquisition attempt whose outcome it does not use (cancelled, failed, or
-- answered too late) and for holds it lost track of: whatever the owner
-- holds is released, and a request of that owner still on its way (a lost
-- reply, a request held up in the network or in a frozen Redis, a client
-- library's own retry) takes nothing when it lands.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the abandonment mark of the owner  {name}:abandoned:<owner>
-- ARGV[1]  owner id
-- ARGV[2]  how long the mark lasts, in ms (acquire.lua refuses the owner
--          while it exists)
-- ARGV[3]  release channel
-- ARGV[4]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[5]  the message: the releasing client's id
--
-- Returns 1 if it freed the lock (waiters were notified), 0 otherwise.
--
-- The mark is written first: a script that fails half-way (an ACL that
-- refuses a command) leaves the lock untouched rather than freed and open
-- to the late request.

redis.call('SET', KEYS[2], 1, 'PX', ARGV[2])
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[4] == 's' then
  redis.call('SPUBLISH', ARGV[3], ARGV[5])
else
  redis.call('PUBLISH', ARGV[3], ARGV[5])
end
return 1
