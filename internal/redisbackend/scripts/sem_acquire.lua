-- sem_acquire.lua: take permits of a semaphore, or join its queue. lib.lua
-- and queue.lua are prepended; lib.lua's header describes the keys, the
-- lock hash, the holders and the queue.
--
-- Every acquisition is an owner of its own, holding n permits with a lease
-- of its own: the permits come back when it releases them, or when its
-- lease ends (its holder died), by the server's clock. Waiters queue in
-- arrival order and a release grants the places at the head of the queue
-- whose permits fit, in order: a request for many permits is not passed by
-- a stream of small ones. The permits held never add up to more than the
-- capacity C.
--
-- The capacity is C: set by the first user from its own (ARGV[3]) when C
-- does not exist, or by sem_permits.lua. It lasts ARGV[5] after the
-- semaphore's last acquisition, and never expires before its last holder's
-- lease or its last place (see queue.lua's capacity_ttl).
--
-- KEYS[1..6]  L, F, Q, QT, QI, H
-- KEYS[7]  the abandonment mark of this owner (see abandon.lua)
-- KEYS[8]  C, the capacity
-- ARGV[1]  owner id
-- ARGV[2]  n, the permits asked for
-- ARGV[3]  the capacity as this client knows it
-- ARGV[4]  lease in ms (set now, or asked for when the permits are granted)
-- ARGV[5]  how long the fencing counter and the capacity outlive their
--          last use, in ms
-- ARGV[6]  host name, ARGV[7] process id of the owner
-- ARGV[8]  queue timeout in ms: how long a place lasts without a refresh;
--          '0' never queues (TryAcquire)
-- ARGV[9]  the request's number, 1 for an acquisition
-- ARGV[10] the id of the owner's process, which hears of grants on the lock
--          key + ':grant:' + this id
-- ARGV[11] 's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
--
-- Returns, with cap the capacity in force as the last element:
--   {1, token, 1, gseq, glease, cap}  the owner holds its permits (taken
--                      now, by an earlier copy of this request, or granted
--                      since)
--   {2, pttl, cap}     the owner has a place in the queue; pttl is the
--                      lock's remaining lease (its last holder's) if the
--                      owner is first in line, else -1
--   {0, pttl, cap}     not taken: TryAcquire found too few permits free, or
--                      others waiting; or the owner was abandoned (pttl -2,
--                      cap 0)
--   {-1}               the name is in use by another kind
--   {-4, cap}          n is more than the capacity: it could never be
--                      granted, nothing changed

local k = KEYS
local owner, n, capacity, lease, retention, host, pid, wait, seq, id, mode =
  ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]),
  ARGV[9], ARGV[10], ARGV[11]

if redis.call('GET', k[7]) then
  return {0, -2, 0}
end
local now, now_us = clock()
purge_places(k, now)
shared_purge(k, now)

local state = redis.call('HMGET', k[1], 'kind', 't:' .. owner, 'g:' .. owner)
if state[1] and state[1] ~= 'sem' or not state[1] and redis.call('EXISTS', k[1]) == 1 then
  return {-1} -- a mutex or a read-write lock
end
local cap = tonumber(redis.call('GET', k[8]))
if not cap then
  redis.call('SET', k[8], capacity, 'PX', retention)
  cap = tonumber(capacity)
  drop_oversized(k, cap) -- places left from a capacity that was lost
end
capacity_ttl(k, now, retention)
if state[2] then
  local gseq, glease = string.match(state[3], '^(%d+) (%d+)$')
  return {1, state[2], 1, tonumber(gseq), tonumber(glease), cap}
end
if n > cap then
  return {-4, cap}
end

local first, kind = head(k)
if kind and kind ~= 's' then
  return {-1} -- the queue of another kind
end
if admits(k, 's', n) and (first == nil or first == owner) then
  local token
  if first then
    drop_place(k, owner)
    token = shared_admit(k, retention, owner, 's', n, 1, lease, lease, seq, pid, host, now)
    settle(k, retention, mode, now) -- places behind it may fit too
  else
    token = shared_admit(k, retention, owner, 's', n, 1, lease, lease, seq, pid, host, now)
  end
  return {1, token, 1, tonumber(seq), lease, cap}
end
settle(k, retention, mode, now, owner) -- the first waiters may go now
local token, gseq, glease = holding(k, owner)
if token then
  return {1, token, 1, gseq, glease, cap} -- this owner was among them
end
local reply = join(k, owner, place_value(k, 's', n, seq, lease, wait, id, pid, host), wait, now, now_us)
if reply[1] == 2 then
  outlive(k[8], wait) -- the place's deadline
end
reply[3] = cap
return reply
