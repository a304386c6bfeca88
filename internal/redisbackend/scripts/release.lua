-- release.lua: remove one hold of an owner, or all of them; when the owner
-- has none left it lets go of the lock: a plain mutex is free and its
-- waiters are told, a fair mutex or a shared lock (read-write lock,
-- semaphore) goes to the first in its queue that it admits. lib.lua and
-- queue.lua are prepended; lib.lua's header describes the keys and the lock
-- hash. A plain mutex's owner is released by release_plain.lua, which
-- does the same for that kind in fewer steps.
--
-- KEYS[1..8]  L, F, Q, QT, QI, H, the owner's abandonment mark (unused), C
-- ARGV[1]  owner id
-- ARGV[2]  hold id, or '0' for every hold of the owner, and its place in
--          the queue if it has one (a waiter that Close gives up)
-- ARGV[3]  release channel
-- ARGV[4]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[5]  the message: the releasing client's id, so that it can ignore
--          its own releases (it hands them over to its waiters directly)
-- ARGV[6]  how long the fencing counter outlives its last use, in ms (a
--          grant mints a token)
-- ARGV[7]  '1' if the owner may have a place in a queue (a queued kind):
--          with hold '0', the place goes too
--
-- Returns
--   1   that was the owner's last hold: the lock is free now, granted to
--       the next in line, or held by others (readers, permit holders)
--   2   the hold was removed, other holds of the owner remain (a writer
--       whose last write hold this was now only reads, and the readers at
--       the head of the queue join it)
--   0   the lock is not held by this owner (expired, or taken over)
--  -1   the owner holds the lock but not this hold: it was already released
--       (a retried release), nothing changed
--
-- Scripts do not roll back: a command that fails (an ACL that refuses it,
-- say) leaves the writes before it in place. So all checks come first, and
-- the first write decides: when the last hold of a mutex goes, DEL is that
-- write, and the lock is either untouched or gone.

local k = KEYS
local owner, hold, channel, mode, message, retention, queued =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7] == '1'

local function not_owner()
  if hold == '0' and queued and drop_place(k, owner) then
    settle(k, retention, mode, clock()) -- it may have been first in line
  end
  return 0
end

local field = 'h:' .. owner .. ':' .. hold -- a mutex's hold
local state = redis.call('HMGET', k[1], 'owner', 'holds', 'kind', field)
if state[3] == 'rw' or state[3] == 'sem' then
  local now = clock()
  shared_purge(k, now)
  local holds = redis.call('HGET', k[1], 'h:' .. owner)
  if not holds then
    return not_owner()
  end
  if hold ~= '0' then
    local i, j, side = string.find(holds, ' ' .. hold .. '([rws])')
    if not i then
      return -1
    end
    holds = string.sub(holds, 1, i - 1) .. string.sub(holds, j + 1)
    if holds ~= '' then
      redis.call('HSET', k[1], 'h:' .. owner, holds)
      if side == 'w' and not string.find(holds, 'w') then
        -- The writer only reads now: readers at the head join it.
        redis.call('HDEL', k[1], 'writer')
        redis.call('HSET', k[1], 'mode', 'read')
        settle(k, retention, mode, now)
      end
      return 2
    end
  end
  shared_drop(k, owner)
  shared_ttl(k, now)
  settle(k, retention, mode, now)
  return 1
end

if state[1] ~= owner then
  return not_owner()
end
if hold ~= '0' then
  if state[4] == false then
    return -1
  end
  if tonumber(state[2]) > 1 then
    redis.call('HDEL', k[1], field)
    redis.call('HINCRBY', k[1], 'holds', -1)
    return 2
  end
end
free(k, state[3], retention, channel, mode, message)
return 1
