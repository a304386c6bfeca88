-- queue.lua: the functions of the queued kinds (fair mutex, election,
-- read-write lock, semaphore): places in a queue, the holders of a shared
-- lock, and grants. It is not a script of its own: scripts.go puts it
-- after lib.lua in front of every script that can meet a queued kind (all
-- but acquire.lua, release_plain.lua and multi_acquire.lua, which only
-- take or free plain mutexes and so do without it: Redis runs the whole
-- preamble, defining each of its functions, at every call). lib.lua's
-- header describes the keys and the lock hash.

----------------------------------------------------------------------------
-- Places in a queue.

-- purge_places removes the places whose deadline has passed.
local function purge_places(k, now)
  local gone = redis.call('ZRANGEBYSCORE', k[4], '-inf', int(now))
  if #gone == 0 then
    return
  end
  redis.call('ZREMRANGEBYSCORE', k[4], '-inf', int(now))
  for i = 1, #gone, 500 do -- unpack has a limit of a few thousand
    local part = {unpack(gone, i, math.min(i + 499, #gone))}
    redis.call('ZREM', k[3], unpack(part))
    local fields = {}
    for _, owner in ipairs(part) do
      fields[#fields + 1] = owner
      fields[#fields + 1] = 'v:' .. owner
    end
    redis.call('HDEL', k[5], unpack(fields))
  end
end

-- queue_ttl makes the queue keys expire with their latest place.
local function queue_ttl(k, now)
  local last = redis.call('ZRANGE', k[4], -1, -1, 'WITHSCORES')
  if #last == 0 then
    return
  end
  local ttl = math.max(tonumber(last[2]) - now, 1)
  redis.call('PEXPIRE', k[3], ttl)
  redis.call('PEXPIRE', k[4], ttl)
  redis.call('PEXPIRE', k[5], ttl)
end

-- drop_place removes the place of owner, and reports whether it had one.
local function drop_place(k, owner)
  if redis.call('ZREM', k[3], owner) == 0 then
    return false
  end
  redis.call('ZREM', k[4], owner)
  redis.call('HDEL', k[5], owner, 'v:' .. owner)
  return true
end

-- add_place puts owner at the back of the queue: arrival order is the
-- server time in µs, made unique and increasing even if the clock steps
-- back; the place expires wait ms from now unless refreshed.
local function add_place(k, owner, info, wait, now, now_us)
  local last = redis.call('ZRANGE', k[3], -1, -1, 'WITHSCORES')[2]
  local arrival = now_us
  if last and tonumber(last) >= arrival then
    arrival = tonumber(last) + 1
  end
  redis.call('ZADD', k[3], int(arrival), owner)
  redis.call('ZADD', k[4], int(now + wait), owner)
  redis.call('HSET', k[5], owner, info)
  queue_ttl(k, now)
end

-- join is how an acquire script that does not take the lock ends: owner
-- keeps the place it has (a repeated request), or gets one at the back
-- described by info, unless wait is 0 (a TryLock never queues). The reply
-- is {2, pttl} (queued; pttl is the lock's remaining lease if owner is
-- first in line, else -1) or {0, pttl} (not queued).
local function join(k, owner, info, wait, now, now_us)
  if not redis.call('ZSCORE', k[3], owner) then
    if wait == 0 then
      return {0, redis.call('PTTL', k[1])}
    end
    add_place(k, owner, info, wait, now, now_us)
  end
  if redis.call('ZRANGE', k[3], 0, 0)[1] == owner then
    return {2, redis.call('PTTL', k[1])}
  end
  return {2, -1}
end

-- place_value makes the QI value of a place of the lock k: kind is 'f'
-- (fair mutex), 'e' (an election's candidate), 'r' or 'w' (the read or
-- write side of a read-write lock) or 's' (a semaphore), n the permits
-- asked for (1 but for a semaphore), id the id of the owner's process
-- (its Backend), whose grant channel is the lock key + ':grant:' + id.
-- The channel is stored whole, as earlier versions stored it, but is
-- never split from the rest: the lock key may contain spaces and any
-- other character (place_info).
local function place_value(k, kind, n, seq, lease, wait, id, pid, host)
  return kind .. ' ' .. n .. ' ' .. seq .. ' ' .. lease .. ' ' .. wait .. ' ' .. k[1] .. ':grant:' .. id .. ' ' ..
    pid .. ' ' .. host
end

-- place_info parses a QI value of the lock k: the place's kind, the
-- permits asked for, the number of the owner's last request applied, the
-- lease it asked for, its queue timeout, the id of its process, its pid
-- and host; or nil if v is not such a value. Only the five numbers at the
-- start, the process id and the pid are read as words: the channel is
-- matched as the text it must be (the lock key is not a word, and not a
-- pattern), and the host is the rest, whatever it holds.
local function place_info(k, v)
  local kind, n, seq, lease, wait, rest = string.match(v, '^(%a) (%d+) (%d+) (%d+) (%d+) (.*)$')
  local grants = k[1] .. ':grant:'
  if not rest or string.sub(rest, 1, #grants) ~= grants then
    return nil
  end
  local id, pid, host = string.match(string.sub(rest, #grants + 1), '^(%x+) (%d+) (.*)$')
  if not id then
    return nil
  end
  return kind, tonumber(n), tonumber(seq), tonumber(lease), tonumber(wait), id, pid, host
end

-- grant_channel is where the process id hears of the grants of the lock k.
local function grant_channel(k, id)
  return k[1] .. ':grant:' .. id
end

-- head returns the first place's owner, kind and QI value, or nil. A place
-- without a QI value that place_info reads (keys changed by hand) is
-- dropped.
local function head(k)
  while true do
    local owner = redis.call('ZRANGE', k[3], 0, 0)[1]
    if not owner then
      return nil
    end
    local info = redis.call('HGET', k[5], owner)
    if info and place_info(k, info) then
      return owner, string.sub(info, 1, 1), info
    end
    drop_place(k, owner)
  end
end

----------------------------------------------------------------------------
-- A semaphore's capacity.
--
-- Every holder and every waiter of a semaphore counts on its capacity C:
-- were C to expire under them, the next acquisition would set it again
-- from its own permits argument, undoing a SetPermits. So C never expires
-- before the last holder's lease ends or the last place expires: each
-- step that gives a holder a lease or a place a deadline (shared_admit,
-- shared_renew.lua, join in sem_acquire.lua, refresh.lua) makes C outlive
-- it, and C is kept for the fence retention after each acquisition or
-- SetPermits.

-- outlive makes key, if it exists and expires, expire no sooner than ttl
-- ms from now. It never shortens a TTL.
local function outlive(key, ttl)
  local left = redis.call('PTTL', key)
  if left >= 0 and left < ttl then
    redis.call('PEXPIRE', key, int(ttl))
  end
end

-- capacity_ttl makes C outlive every holder and place of the semaphore k,
-- and retention ms from now.
local function capacity_ttl(k, now, retention)
  local ttl = tonumber(retention)
  local holder = redis.call('ZRANGE', k[6], -1, -1, 'WITHSCORES')
  if #holder > 0 then
    ttl = math.max(ttl, tonumber(holder[2]) - now)
  end
  local place = redis.call('ZRANGE', k[4], -1, -1, 'WITHSCORES')
  if #place > 0 then
    ttl = math.max(ttl, tonumber(place[2]) - now)
  end
  outlive(k[8], ttl)
end

-- drop_oversized removes every place of the semaphore k that asks for
-- more permits than cap, its capacity now: it could never be granted, and
-- would block the queue. Its owner finds the place gone at its next
-- refresh, asks again, and is refused (sem_acquire.lua's {-4}).
local function drop_oversized(k, cap)
  local owners = redis.call('ZRANGE', k[3], 0, -1)
  for i = 1, #owners, 500 do -- unpack has a limit of a few thousand
    local part = {unpack(owners, i, math.min(i + 499, #owners))}
    local values = redis.call('HMGET', k[5], unpack(part))
    for j, owner in ipairs(part) do
      local n = tonumber(string.match(values[j] or '', '^s (%d+) '))
      if n and n > cap then
        drop_place(k, owner)
      end
    end
  end
end

----------------------------------------------------------------------------
-- Holders of a shared lock: a read-write lock or a semaphore.

-- shared_ttl makes the lock hash and H expire with the last holder's
-- lease, and deletes the hash when no holder is left.
local function shared_ttl(k, now)
  local last = redis.call('ZRANGE', k[6], -1, -1, 'WITHSCORES')
  if #last == 0 then
    redis.call('DEL', k[1])
    return
  end
  local ttl = math.max(tonumber(last[2]) - now, 1)
  redis.call('PEXPIRE', k[1], ttl)
  redis.call('PEXPIRE', k[6], ttl)
end

-- shared_drop removes the holder owner and all of its holds. The last
-- holder takes the lock hash with it.
local function shared_drop(k, owner)
  redis.call('ZREM', k[6], owner)
  if redis.call('EXISTS', k[6]) == 0 then
    redis.call('DEL', k[1])
    return
  end
  local f = redis.call('HMGET', k[1], 'writer', 'n:' .. owner)
  redis.call('HDEL', k[1], 't:' .. owner, 'h:' .. owner, 'n:' .. owner, 's:' .. owner, 'g:' .. owner, 'i:' .. owner)
  if f[1] == owner then
    redis.call('HDEL', k[1], 'writer')
    redis.call('HSET', k[1], 'mode', 'read')
  end
  if f[2] then
    redis.call('HINCRBY', k[1], 'used', -tonumber(f[2]))
  end
end

-- shared_purge removes the holders whose lease has ended (they died, or
-- were paused or cut off for longer than their lease).
local function shared_purge(k, now)
  local gone = redis.call('ZRANGEBYSCORE', k[6], '-inf', int(now))
  for _, owner in ipairs(gone) do
    shared_drop(k, owner)
  end
  if #gone > 0 then
    shared_ttl(k, now)
  end
end

-- shared_admit makes owner a holder of the shared lock, with hold id hold
-- of kind ('r' or 'w' for a read-write lock's sides, 's' for n permits of
-- a semaphore, whose capacity then outlives the lease), a fresh token and
-- a lease that ends in expire ms; gseq and glease as for fair_take. The
-- caller has checked that the lock admits it.
local function shared_admit(k, retention, owner, kind, n, hold, expire, glease, gseq, pid, host, now)
  local token = mint(k[2], retention)
  redis.call('HSET', k[1], 't:' .. owner, token, 'h:' .. owner, ' ' .. hold .. kind,
    's:' .. owner, gseq, 'g:' .. owner, gseq .. ' ' .. glease, 'i:' .. owner, pid .. ' ' .. int(now) .. ' ' .. host)
  if kind == 's' then
    redis.call('HSET', k[1], 'kind', 'sem', 'n:' .. owner, n)
    redis.call('HINCRBY', k[1], 'used', n)
    outlive(k[8], expire)
  elseif kind == 'w' then
    redis.call('HSET', k[1], 'kind', 'rw', 'mode', 'write', 'writer', owner)
  else
    redis.call('HSET', k[1], 'kind', 'rw', 'mode', 'read')
  end
  redis.call('ZADD', k[6], int(now + expire), owner)
  shared_ttl(k, now)
  return token
end

-- admits reports whether the shared lock takes a new owner of kind ('r',
-- 'w' or 's') for n permits now, queue aside: a writer when nobody holds
-- the read-write lock, a reader when nobody writes; a semaphore when n
-- more permits fit in its capacity.
local function admits(k, kind, n)
  if kind == 's' then
    local cap = tonumber(redis.call('GET', k[8]))
    local used = tonumber(redis.call('HGET', k[1], 'used') or '0')
    return cap ~= nil and used + n <= cap
  end
  if redis.call('EXISTS', k[6]) == 0 then
    return true
  end
  return kind == 'r' and redis.call('HGET', k[1], 'mode') == 'read'
end

----------------------------------------------------------------------------
-- Grants.

-- announce tells the observers of an election who leads now, on the
-- channel '<lock>:leader': a JSON object {term, value, id, host, pid,
-- since} for a new leader, id being the first 16 hex digits of the SHA-1
-- of its owner id (the owner id itself is secret); with token nil, that
-- nobody leads: {ended}, the term that ended, which is the last token the
-- fencing counter issued (only a new leader takes one), or '{}' if the
-- counter has expired. Every script that changes an election's leader
-- announces it, so observers see every change, in order.
local function announce(k, mode, owner, token, value, pid, host, now)
  local message = '{}'
  if token then
    message = cjson.encode({term = token, value = value, id = string.sub(redis.sha1hex(owner), 1, 16),
      host = host, pid = pid, since = int(now)})
  else
    local ended = redis.call('GET', k[2])
    if ended then
      message = cjson.encode({ended = ended})
    end
  end
  publish(k[1] .. ':leader', mode, message)
end

-- fair_take makes owner the holder of the free fair mutex, with its first
-- hold (id 1), a fresh token, and a lease that ends in expire ms. gseq is
-- the number of the owner's last request applied so far, and glease a
-- lease measured from when the store applied it that the lock's expiry is
-- no earlier than: the owner sent that request before it was applied, so
-- its send time + glease bounds the lease's end from below, whoever took
-- the lock for it (see the engine's place.go). Renewals of the owner
-- continue the numbering, so gseq is also where their sequence starts.
--
-- An election ('elect') is a fair mutex whose holder leads, with a value:
-- its observers are told of the new leader (announce).
local function fair_take(k, retention, owner, expire, glease, gseq, pid, host, now, kind, value, mode)
  local token = mint(k[2], retention)
  redis.call('HSET', k[1], 'owner', owner, 'token', token, 'holds', 1,
    'kind', kind, 'gseq', gseq, 'glease', glease, 'rseq', gseq,
    'i', pid .. ' ' .. int(now) .. ' ' .. host, 'h:' .. owner .. ':1', 1)
  redis.call('PEXPIRE', k[1], expire)
  if kind == 'elect' then
    redis.call('HSET', k[1], 'value', value)
    announce(k, mode, owner, token, value, pid, host, now)
  end
  return token
end

-- grant_place gives the lock to the place of owner, described by info (a
-- QI value). The lock expires when the place would have (its last refresh
-- + its queue timeout), or after the lease the owner asked for if that is
-- sooner: a grantee that died or froze holds the lock no longer than its
-- place would have lasted, so a dead waiter is skipped within the queue
-- timeout of its last refresh, granted or not; a live one's watchdog
-- renews the lease to its full length. Unless owner is quiet, the grant is
-- added to batch, for the owner's process: ' <sha1 of the owner> <token>
-- <gseq> <glease>' (the owner id itself is secret and never published),
-- with glease the shorter of the lease and the queue timeout, measured
-- from when the store applied request gseq.
local function grant_place(k, retention, owner, info, now, batch, quiet, mode)
  local kind, n, seq, lease, wait, id, pid, host = place_info(k, info)
  local glease = math.min(lease, wait)
  local left = tonumber(redis.call('ZSCORE', k[4], owner)) - now
  local expire = math.max(math.min(lease, left), 1)
  local value = redis.call('HGET', k[5], 'v:' .. owner)
  drop_place(k, owner)
  local token
  if kind == 'f' then
    token = fair_take(k, retention, owner, expire, glease, seq, pid, host, now, 'fair')
  elseif kind == 'e' then
    token = fair_take(k, retention, owner, expire, glease, seq, pid, host, now, 'elect', value or '', mode)
  else
    token = shared_admit(k, retention, owner, kind, n, 1, expire, glease, seq, pid, host, now)
  end
  if owner ~= quiet then
    local channel = grant_channel(k, id)
    batch[channel] = (batch[channel] or 'g') .. ' ' .. redis.sha1hex(owner) .. ' ' .. token .. ' ' .. seq .. ' ' .. glease
  end
end

-- settle purges the queue (and the holders of a shared lock), and grants
-- the lock to as many places at the head of the queue as it admits now: a
-- fair mutex to the first if nobody holds it; a read-write lock to the
-- first writer if nobody holds it, or to the readers in a row at the head
-- if nobody writes; a semaphore to the places in a row at the head whose
-- permits fit (first come, first served: a large request is not passed by
-- small ones). Each grantee's process gets one message for all its grants,
-- on its grant channel; quiet (an owner, or nil) is not told, it learns
-- from the script's reply. So a lock is never left free while someone
-- waits, as of the last script that looked at it.
local function settle(k, retention, mode, now, quiet)
  purge_places(k, now)
  local batch = {}
  local owner, kind, info = head(k)
  if kind == 'f' or kind == 'e' then
    if redis.call('EXISTS', k[1]) == 0 then
      grant_place(k, retention, owner, info, now, batch, quiet, mode)
    end
  elseif kind then
    shared_purge(k, now)
    while owner do
      local n = tonumber(string.match(info, '^%a (%d+)'))
      if kind == 's' and n > tonumber(redis.call('GET', k[8]) or n) then
        -- More permits than the capacity: it could never be granted,
        -- and would block the queue. Such places go when the capacity is
        -- set (drop_oversized); this one was left by an older version,
        -- whose SetPermits dropped only the head of the queue.
        drop_place(k, owner)
      elseif admits(k, kind, n) then
        grant_place(k, retention, owner, info, now, batch, quiet, mode)
        if kind == 'w' then
          break
        end
      else
        break
      end
      owner, kind, info = head(k)
    end
  end
  for channel, message in pairs(batch) do
    publish(channel, mode, message)
  end
end

-- holding returns the token, gseq and glease of owner if it holds the
-- lock as a fair mutex, an election or a shared lock (purged of expired
-- holders first), or nil.
local function holding(k, owner)
  local f = redis.call('HMGET', k[1], 'owner', 'token', 'gseq', 'glease', 't:' .. owner, 'g:' .. owner)
  if f[1] == owner then
    return f[2], tonumber(f[3]), tonumber(f[4])
  end
  if f[5] then
    local gseq, glease = string.match(f[6], '^(%d+) (%d+)$')
    return f[5], tonumber(gseq), tonumber(glease)
  end
  return nil
end

-- free deletes a mutex of kind (nil: plain; 'fair'; 'elect') and hands it
-- on: a fair mutex or an election to the first live place in its queue
-- (an election with nobody to lead announces it), a plain one's waiters
-- are told with message.
local function free(k, kind, retention, channel, mode, message)
  redis.call('DEL', k[1])
  if kind == 'fair' or kind == 'elect' then
    if redis.call('EXISTS', k[3]) == 1 then -- else nobody waits: nothing to settle
      settle(k, retention, mode, clock())
    end
    if kind == 'elect' and redis.call('EXISTS', k[1]) == 0 then
      announce(k, mode)
    end
  else
    publish(channel, mode, message)
  end
end

----------------------------------------------------------------------------
-- Telling holders that an operator took their lock away (forceunlock.lua,
-- revoke.lua).

-- tell tells the process of owner, on host with pid, that its lock name
-- was taken away: it hears '<sha1 of owner>\n<name>' on prefix .. host ..
-- ':' .. pid, with PUBLISH (a Cluster forwards it to every node).
local function tell(prefix, name, owner, host, pid)
  redis.call('PUBLISH', prefix .. host .. ':' .. pid, redis.sha1hex(owner) .. '\n' .. name)
end

-- tell_shared tells the process of owner, a holder of the shared lock k,
-- as tell does.
local function tell_shared(k, prefix, name, owner)
  local pid, _, host = holder_info(redis.call('HGET', k[1], 'i:' .. owner))
  if pid then
    tell(prefix, name, owner, host, pid)
  end
end
