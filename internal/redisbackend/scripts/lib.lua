-- lib.lua: functions shared by the lock scripts. It is not a script of its
-- own: scripts.go puts it in front of each script (and queue.lua after it
-- in front of the scripts that can meet a queued kind), so that the
-- fencing, queue and grant rules exist once.
--
-- The scripts about one lock take its keys in one order, all in the
-- lock's Redis Cluster slot (acquire.lua and release_plain.lua, which only
-- take or free a plain mutex, take the few they use; their headers say
-- which):
--   KEYS[1]  L   the lock hash                      {name}
--   KEYS[2]  F   the fencing counter                {name}:fence
--   KEYS[3]  Q   the queue of a fair or read-write lock: sorted set, owner
--                -> arrival (server time in µs, made unique)
--   KEYS[4]  QT  sorted set, owner -> server time (ms) at which the place
--                expires unless its owner refreshes it
--   KEYS[5]  QI  hash, owner -> 'kind n seq lease queue channel pid host':
--                what a grant needs (see place_value and place_info: the
--                channel is the lock key + ':grant:' + the id of the
--                owner's process; the lock key may hold spaces, the host
--                is the rest of the value); 'v:<owner>' -> an election
--                candidate's value
--   KEYS[6]  H   a shared lock's holders (read-write lock, semaphore):
--                sorted set, owner -> server time (ms) at which its lease
--                ends
--   KEYS[7]  the abandonment mark of the request's owner (abandon.lua)
--   KEYS[8]  C   a semaphore's capacity                 {name}:cap
--
-- The lock hash of a plain or fair mutex holds
--   owner, token, holds   the holder, its fencing token, its hold count
--   h:<owner>:<id>        one field per hold (release.lua)
--   i                     'pid since host': who holds it, and since when
--                         (ms), for inspection (holder_info reads it)
--   rseq                  the last renewal sequence number applied (renew.lua)
--   revoked               set by revoke.lua: renewals are refused from then on
--   kind                  'fair' for a fair mutex, 'elect' for an election
--                         (a fair mutex whose holder is the leader), absent
--                         for a plain one
--   value                 an election: the leader's value
--   gseq, glease          a fair mutex: the holder's last request applied
--                         before it got the lock, and how long after that
--                         request the lock lasts at least (see fair_take)
-- and its lease is the hash's own expiry. The hash of a shared lock (a
-- read-write lock or a semaphore) holds
--   kind                  'rw' or 'sem'
--   mode                  a read-write lock: 'read' or 'write'
--   writer                a read-write lock: the writing owner, if any
--   used                  a semaphore: the permits held
--   t:<owner>             a holder's fencing token
--   h:<owner>             its holds: ' <id><r|w|s>' for each
--   n:<owner>             a semaphore: its permits
--   s:<owner>             its last renewal sequence number applied; removed
--                         by revoke.lua, and renewals are refused without it
--   g:<owner>             'gseq glease', as above
--   i:<owner>             'pid since host', for inspection
-- and each holder's lease is its expiry in H; the hash and H expire with
-- the last holder (shared_ttl). A semaphore's capacity C outlives them and
-- its places (capacity_ttl), and lasts the fence retention after the last
-- acquisition.
--
-- A queue's keys die with it: Q, QT and QI lose their last member when
-- the last place goes, and Redis deletes an empty key; until then they
-- expire no earlier than their latest place (queue_ttl), so nothing
-- outlives its waiters, and nothing a holder or a waiter counts on
-- expires before it. Every script that reads the queue or the holders
-- purges the expired ones first: a dead waiter costs at most its queue
-- timeout, a dead reader or permit holder at most its lease.

-- clock returns the server time in ms and in µs. Scripts replicate their
-- effects (Redis 5 and later), so reading the clock is allowed.
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- int formats a number as an integer. A Lua number holds integers exactly
-- up to 2^53 (tokens and µs timestamps are about 2^51 today), but may turn
-- into '1.7e+15' as a command argument.
local function int(n)
  return string.format('%d', n)
end

-- mint returns a new fencing token from the counter key fence, kept for
-- retention ms after its last use: the larger of the last token + 1 and the
-- server time in microseconds.
--
-- So a token is never below the server clock, and the counter keeps up
-- with it (each acquisition takes more than a microsecond of server time,
-- so the counter does not run ahead of the clock either). A counter that
-- is missing (first use, expired, lost with the data) or behind (a replica
-- promoted before the last tokens reached it) mints tokens above every
-- token issued before, unless the server clock is behind the clock of the
-- server that issued them by more than the time elapsed since: a clock
-- step back, or a failover faster than the skew between master and
-- replica. So the counter can expire, no key leaks, and tokens survive a
-- failover to a lagging replica.
--
-- The counter is written with the clock first and read in the same call
-- (SET ... GET): the clock is ahead of the last token unless two
-- acquisitions fall in the same microsecond or the clock stepped back, and
-- only then is the counter written again, with the last token + 1.
local function mint(fence, retention)
  local _, now = clock()
  local token = int(now)
  local last = tonumber(redis.call('SET', fence, token, 'PX', retention, 'GET') or '0')
  if last >= now then
    token = int(last + 1)
    redis.call('SET', fence, token, 'PX', retention)
  end
  return token
end

-- per_item runs step(i, ...) for each item i, from 1 to n, of a batch
-- script (renew.lua, shared_renew.lua, refresh.lua), each in a pcall of
-- its own, and returns their replies: step's, or, for a step that raised
-- an error (a command refused, a key of the wrong type), an error reply in
-- the array of replies. So one item's failure never touches another's
-- step; the failed step's outcome is unknown (scripts do not roll back:
-- its writes before the error stay). The error is a Redis error (a
-- string, or a table with the text in err, depending on the version) or
-- a Lua error (a string).
local function per_item(n, step, ...)
  local out = {}
  for i = 1, n do
    local ok, reply = pcall(step, i, ...)
    if not ok then
      if type(reply) == 'table' then
        reply = reply.err
      end
      reply = {err = 'ERR ' .. tostring(reply)}
    end
    out[i] = reply
  end
  return out
end

local function publish(channel, mode, message)
  if mode == 's' then
    redis.call('SPUBLISH', channel, message)
  else
    redis.call('PUBLISH', channel, message)
  end
end

-- holder_info reads a holder's 'pid since host' (the field i of a mutex's
-- hash, i:<owner> of a shared lock's): its pid, since and host, or nil.
local function holder_info(info)
  return string.match(info or '', '^(%S+) (%S+) (.*)$')
end

-- plain_take makes owner the holder of the free plain mutex k, with hold
-- id hold, a lease of lease ms and the fencing token token, or a fresh one
-- when token is nil; info is the holder's 'pid since host' (since: its
-- wall clock in ms), for inspection. A token given must be above the
-- counter: it becomes the counter.
local function plain_take(k, retention, owner, hold, lease, info, token)
  if token then
    token = int(token)
    redis.call('SET', k[2], token, 'PX', retention)
  else
    token = mint(k[2], retention)
  end
  redis.call('HSET', k[1], 'owner', owner, 'token', token, 'holds', 1, 'i', info,
    'h:' .. owner .. ':' .. hold, 1)
  redis.call('PEXPIRE', k[1], lease)
  return token
end

