-- rw_acquire.lua: take the read or the write side of a read-write lock, add
-- a hold to a side the owner holds, or join the lock's queue. lib.lua and
-- queue.lua are prepended; lib.lua's header describes the keys, the lock
-- hash, the holders and the queue.
--
-- Any number of owners read, or one writes. Readers and writers wait in
-- one queue, in arrival order: a reader that arrives while a writer waits
-- queues behind it (no writer starves), and a release grants the first
-- writer alone, or all the readers at the head of the queue.
--
-- KEYS[1..6]  L, F, Q, QT, QI, H
-- KEYS[7]  the abandonment mark of this owner (see abandon.lua)
-- KEYS[8]  C (unused)
-- ARGV[1]  owner id
-- ARGV[2]  hold id (1 for a new owner)
-- ARGV[3]  'r' (read) or 'w' (write)
-- ARGV[4]  lease in ms (set now, or asked for when the lock is granted)
-- ARGV[5]  how long the fencing counter outlives its last use, in ms
-- ARGV[6]  host name, ARGV[7] process id of the owner
-- ARGV[8]  queue timeout in ms: how long a place lasts without a refresh;
--          '0' never queues (TryLock, TryRLock)
-- ARGV[9]  the request's number, 1 for an acquisition
-- ARGV[10] the id of the owner's process, which hears of grants on the lock
--          key + ':grant:' + this id
-- ARGV[11] 's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[12] '1' to re-enter only: add hold ARGV[2] to an owner that holds
--          the lock, never take it anew
--
-- Returns
--   {1, token, holds, gseq, glease}  the owner holds the lock after the
--                      call (taken now, by an earlier copy of this request,
--                      or granted since); holds is its hold count
--   {2, pttl}          the owner has a place in the queue; pttl is the
--                      lock's remaining lease (its last holder's) if the
--                      owner is first in line, else -1
--   {0, pttl}          not taken: TryLock found it taken or waited for, a
--                      re-entry found the owner gone, or the owner was
--                      abandoned (pttl -2)
--   {-1}               the name is in use by another kind
--   {-3}               a re-entry for writing by an owner that only reads
--                      (it released its write holds): it could never be
--                      granted, nothing changed

local k = KEYS
local owner, hold, side, lease, retention, host, pid, wait, seq, id, mode, reenter =
  ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]),
  ARGV[9], ARGV[10], ARGV[11], ARGV[12] == '1'

if redis.call('GET', k[7]) then
  return {0, -2}
end
local now, now_us = clock()
purge_places(k, now)
shared_purge(k, now)

local state = redis.call('HMGET', k[1], 'kind', 't:' .. owner, 'h:' .. owner, 'g:' .. owner)
if state[1] and state[1] ~= 'rw' or not state[1] and redis.call('EXISTS', k[1]) == 1 then
  return {-1} -- a fair or plain mutex
end

if state[2] then
  local holds = state[3]
  local _, count = string.gsub(holds, ' ', '')
  local gseq, glease = string.match(state[4], '^(%d+) (%d+)$')
  if not string.find(holds, ' ' .. hold .. '[rws]') then
    if side == 'w' and not string.find(holds, 'w') then
      return {-3}
    end
    redis.call('HSET', k[1], 'h:' .. owner, holds .. ' ' .. hold .. side)
    count = count + 1
  end
  return {1, state[2], count, tonumber(gseq), tonumber(glease)}
end
if reenter then
  return {0, redis.call('PTTL', k[1])}
end

local first, kind = head(k)
if kind == 'f' or kind == 'e' then
  return {-1} -- the queue of a fair mutex or an election
end
if admits(k, side, 1) and (first == nil or first == owner) then
  local token
  if first then
    drop_place(k, owner)
    token = shared_admit(k, retention, owner, side, 1, hold, lease, lease, seq, pid, host, now)
    settle(k, retention, mode, now) -- readers behind it may go too
  else
    token = shared_admit(k, retention, owner, side, 1, hold, lease, lease, seq, pid, host, now)
  end
  return {1, token, 1, tonumber(seq), lease}
end
settle(k, retention, mode, now, owner) -- the first waiters may go now
local token, gseq, glease = holding(k, owner)
if token then
  return {1, token, 1, gseq, glease} -- this owner was among them
end

return join(k, owner, place_value(k, side, 1, seq, lease, wait, id, pid, host), wait, now, now_us)
