-- refresh.lua: keep the places of many waiters (fair mutexes, read-write
-- locks, semaphores) in one call, batched with renewals, and tell each
-- whether it holds the lock now. lib.lua and queue.lua are prepended;
-- lib.lua's header describes the keys and the queue.
--
-- For waiter i (from 1), with k = 8(i-1) and a = 7(i-1):
-- KEYS[k+1..k+6]  L, F, Q, QT, QI, H of its lock
-- KEYS[k+7]       the abandonment mark of the waiter
-- KEYS[k+8]       C, the capacity of a semaphore
-- ARGV[a+1]  owner id
-- ARGV[a+2]  lease in ms, asked for when the lock is granted
-- ARGV[a+3]  queue timeout in ms: the place lasts that long from now
-- ARGV[a+4]  the request's number, increasing per owner
-- ARGV[a+5]  how long the fencing counter outlives its last use, in ms
-- ARGV[a+6]  's' to publish with SPUBLISH (Redis Cluster), anything else PUBLISH
-- ARGV[a+7]  a semaphore's capacity as the waiter knows it (0 for the
--            other kinds): C is set to it only if C is missing, which it
--            never is while someone holds or waits (see capacity_ttl in
--            queue.lua) unless it was lost (a failover, a flush)
--
-- Returns one reply per waiter:
--   {1, token, gseq, glease}  the waiter holds the lock: granted by
--                     someone else's script, or taken now (the lock admits
--                     it and it was first in line: a holder's lease ended
--                     without a release). gseq is the number of the
--                     waiter's last request applied before the grant; the
--                     lock lasts at least glease after that request was
--                     applied (see fair_take).
--   {2, pttl}         still waiting; pttl is the lock's remaining lease if
--                     the waiter is first in line, else -1
--   {0}               no place: it expired (the waiter was paused or cut
--                     off for longer than its queue timeout), it was
--                     dropped (a semaphore's capacity shrank below its
--                     permits), or the waiter was abandoned. A refresh
--                     never makes a place: one that arrives late cannot
--                     queue an owner that has moved on.
--   an error reply    this waiter's step failed (a command refused, a key
--                     of the wrong type): its outcome is unknown. Each
--                     waiter's step runs in a pcall of its own, so that
--                     the others' are not affected.
-- A semaphore's waiter gets the capacity in force added to the first two:
-- {1, token, gseq, glease, cap} and {2, pttl, cap}.
--
-- A request numbered below the last one applied changes nothing: its
-- place lasts as the later request set it.

-- refresh_one refreshes waiter i and returns its reply.
local function refresh_one(i, now)
  local k = {unpack(KEYS, 8 * i - 7, 8 * i)}
  local a = 7 * (i - 1)
  local owner, lease, wait, seq, retention, mode, capacity =
    ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), ARGV[a + 5], ARGV[a + 6],
    tonumber(ARGV[a + 7])
  purge_places(k, now)
  local kind = redis.call('HGET', k[1], 'kind')
  if kind == 'rw' or kind == 'sem' then
    shared_purge(k, now)
  end
  if capacity > 0 and redis.call('SET', k[8], capacity, 'NX', 'PX', retention) then
    drop_oversized(k, capacity) -- places left from a capacity that was lost
    capacity_ttl(k, now, retention)
  end
  -- with_capacity adds a semaphore's capacity in force to a reply.
  local function with_capacity(r)
    if capacity > 0 then
      r[#r + 1] = tonumber(redis.call('GET', k[8]) or '0')
    end
    return r
  end
  local token, gseq, glease = holding(k, owner)
  if token then
    return with_capacity({1, token, gseq, glease})
  end
  local info = redis.call('HGET', k[5], owner)
  local side, n, last, _, _, id, pid, host
  if info then
    side, n, last, _, _, id, pid, host = place_info(k, info)
  end
  if not side then
    if info then
      drop_place(k, owner) -- a record changed by hand
    end
    return {0}
  end
  if redis.call('GET', k[7]) then
    return {0}
  end
  if seq > last then
    redis.call('HSET', k[5], owner, place_value(k, side, n, seq, lease, wait, id, pid, host))
    redis.call('ZADD', k[4], int(now + wait), owner)
    queue_ttl(k, now)
    if side == 's' then
      outlive(k[8], wait)
    end
  end
  settle(k, retention, mode, now, owner) -- the lock may admit waiters now
  token, gseq, glease = holding(k, owner)
  if token then
    return with_capacity({1, token, gseq, glease})
  elseif head(k) == owner then
    return with_capacity({2, redis.call('PTTL', k[1])})
  end
  return with_capacity({2, -1})
end

return per_item(#KEYS / 8, refresh_one, clock())
