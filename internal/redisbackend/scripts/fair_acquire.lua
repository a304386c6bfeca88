-- fair_acquire.lua: take a fair mutex or lead an election, or join its
-- queue. lib.lua and queue.lua are prepended; lib.lua's header describes
-- the keys, the lock hash and the queue.
--
-- KEYS[1..6]  L, F, Q, QT, QI, H
-- KEYS[7]  the abandonment mark of this owner (see abandon.lua)
-- KEYS[8]  C (unused)
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms (set now, or asked for when the lock is granted)
-- ARGV[3]  how long the fencing counter outlives its last use, in ms
-- ARGV[4]  host name, ARGV[5] process id of the owner
-- ARGV[6]  queue timeout in ms: how long a place lasts without a refresh;
--          '0' never queues (TryLock)
-- ARGV[7]  the request's number, 1 for an acquisition (refresh.lua sends
--          the next ones)
-- ARGV[8]  the id of the owner's process, which hears of grants on the lock
--          key + ':grant:' + this id
-- ARGV[9]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[10] 'fair' for a fair mutex, 'elect' for an election
-- ARGV[11] an election candidate's value
--
-- Returns
--   {1, token, holds, gseq, glease}  the owner holds the lock: taken now
--                      (it was free and nobody waited, or the owner was
--                      first in line), or by an earlier copy of this
--                      request, or granted since; gseq and glease are
--                      those of that taking (see fair_take)
--   {2, pttl}          the owner has a place in the queue (made now, or by
--                      an earlier copy); pttl is the holder's remaining
--                      lease if the owner is first in line, else -1
--   {0, pttl}          TryLock: someone holds the lock or waits for it
--                      (TryLock never queues and never jumps the queue);
--                      or the owner was abandoned (pttl -2)
--   {-1}               the name is in use by another kind: kinds never mix

local k = KEYS
local owner, lease, retention, host, pid, wait, seq, id, mode, kind, value =
  ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9],
  ARGV[10], ARGV[11]
local side = 'f'
if kind == 'elect' then
  side = 'e'
end

-- The common case first: nothing of the name exists (no holder, no
-- queue) and the owner was not abandoned: it takes the lock.
if redis.call('EXISTS', k[1], k[3], k[7]) == 0 then
  local token = fair_take(k, retention, owner, lease, lease, seq, pid, host, clock(), kind, value, mode)
  return {1, token, 1, tonumber(seq), lease}
end

if redis.call('EXISTS', k[7]) == 1 then
  return {0, -2}
end
local now, now_us = clock()
purge_places(k, now)

local state = redis.call('HMGET', k[1], 'owner', 'kind', 'token', 'holds', 'gseq', 'glease')
if state[1] == owner then
  return {1, state[3], tonumber(state[4]), tonumber(state[5]), tonumber(state[6])}
end
if state[2] and state[2] ~= kind or state[1] and not state[2] then
  return {-1} -- another kind
end

if state[1] == false then
  local first, queued = head(k)
  if queued and queued ~= side then
    return {-1} -- the queue of another kind
  end
  if first == nil or first == owner then
    if first then
      drop_place(k, owner)
    end
    local token = fair_take(k, retention, owner, lease, lease, seq, pid, host, now, kind, value, mode)
    return {1, token, 1, tonumber(seq), lease}
  end
  -- Free, but others wait: the first of them gets it now.
  settle(k, retention, mode, now)
end

local reply = join(k, owner, place_value(k, side, 1, seq, lease, wait, id, pid, host), wait, now, now_us)
if kind == 'elect' and reply[1] == 2 then
  redis.call('HSET', k[5], 'v:' .. owner, value)
end
return reply
