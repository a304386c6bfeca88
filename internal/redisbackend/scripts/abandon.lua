-- abandon.lua: give up an owner for good. The engine runs it for every
-- acquisition attempt whose outcome it does not use (cancelled, failed, or
-- answered too late), for a waiter that gave up its place, and for holds it
-- lost track of: whatever the owner holds is released (a fair mutex or a
-- shared lock to the next in line), its place in a queue is removed, and a
-- request of that owner still on its way (a lost reply, a request held up
-- in the network or in a frozen Redis, a client library's own retry) takes
-- nothing when it lands. lib.lua and queue.lua are prepended; lib.lua's
-- header describes the keys.
--
-- KEYS[1..6]  L, F, Q, QT, QI, H
-- KEYS[7]  the abandonment mark of the owner  {name}:abandoned:<owner>
-- KEYS[8]  C (a semaphore's capacity)
-- ARGV[1]  owner id
-- ARGV[2]  how long the mark lasts, in ms (acquire.lua, fair_acquire.lua,
--          rw_acquire.lua, sem_acquire.lua and refresh.lua refuse the owner
--          while it exists)
-- ARGV[3]  release channel
-- ARGV[4]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[5]  the message: the releasing client's id
-- ARGV[6]  how long the fencing counter outlives its last use, in ms
-- ARGV[7]  '1' if the owner may have a place in a queue (a queued kind)
--
-- Returns 1 if it released the owner's holds (and granted or announced
-- the lock), 0 otherwise.
--
-- The mark is written first: a script that fails half-way (an ACL that
-- refuses a command) leaves the lock untouched rather than freed and open
-- to the late request.

local k = KEYS
local owner, channel, mode, message, retention = ARGV[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
redis.call('SET', k[7], 1, 'PX', ARGV[2])
local placed = ARGV[7] == '1' and drop_place(k, owner)
local state = redis.call('HMGET', k[1], 'owner', 'kind', 't:' .. owner)
if state[2] == 'rw' or state[2] == 'sem' then
  local now = clock()
  if state[3] then
    shared_drop(k, owner)
    shared_ttl(k, now)
  end
  settle(k, retention, mode, now)
  return state[3] and 1 or 0
end
if state[1] ~= owner then
  if placed then
    settle(k, retention, mode, clock()) -- it may have been first in line
  end
  return 0
end
free(k, state[2], retention, channel, mode, message)
return 1
