-- inspect.lua: read a lock's state in one consistent step. lib.lua is
-- prepended; its header describes the keys and the lock hash.
--
-- KEYS[1..8]  L, F, Q, QT, QI, H, an abandonment mark (unused), C
--
-- Returns {kind, pttl, last token, queued, queued readers, queued
-- writers, capacity, permits held by live holders, permits queued,
-- holders...}: kind is ''
-- (plain mutex, or free), 'fair', 'elect', 'rw' or 'sem', with the kind of the
-- queue's places when the lock is free but has a queue; pttl is the lock's
-- remaining lease (-2 when free); the last token is false when the counter
-- has expired; the counts are those of the places that have not expired;
-- the capacity is a semaphore's (0 if none). Each holder is {owner, token,
-- holds, host, pid, since (ms), ttl (ms), writes, permits, value (an
-- election's leader), revoked (1 if revoke.lua revoked it, else 0)} (a
-- mutex or an election has one holder, a shared lock any number).

local k = KEYS
local now = clock()
local f = redis.call('HMGET', k[1], 'kind', 'owner', 'token', 'holds', 'i', 'value', 'revoked')
local kind = f[1] or ''
local out = {kind, redis.call('PTTL', k[1]), redis.call('GET', k[2]), 0, 0, 0,
  tonumber(redis.call('GET', k[8]) or '0'), 0, 0}
if kind ~= '' or redis.call('EXISTS', k[4]) == 1 then
  for _, owner in ipairs(redis.call('ZRANGEBYSCORE', k[4], '(' .. int(now), '+inf')) do
    local side, n = string.match(redis.call('HGET', k[5], owner) or '', '^(%a) (%d+)')
    out[4] = out[4] + 1
    if side == 'r' then out[5] = out[5] + 1 elseif side == 'w' then out[6] = out[6] + 1 end
    if side == 's' then out[9] = out[9] + tonumber(n) end
    if kind == '' then
      kind = ({f = 'fair', e = 'elect', r = 'rw', w = 'rw', s = 'sem'})[side] or ''
      out[1] = kind
    end
  end
end
if f[2] then
  local pid, since, host = holder_info(f[5]) -- nil, not false, if missing: a nil would end the reply
  out[#out + 1] = {f[2], f[3], tonumber(f[4]), host or false, pid or false, since or false, out[2], 0, 1,
    f[6] or '', f[7] and 1 or 0}
elseif f[1] == 'rw' or f[1] == 'sem' then
  local holders = redis.call('ZRANGEBYSCORE', k[6], '(' .. int(now), '+inf', 'WITHSCORES')
  for j = 1, #holders, 2 do
    local owner = holders[j]
    local g = redis.call('HMGET', k[1], 't:' .. owner, 'h:' .. owner, 'i:' .. owner, 'n:' .. owner, 's:' .. owner)
    if g[1] then
      local pid, since, host = holder_info(g[3])
      local _, holds = string.gsub(g[2], ' ', '')
      local _, writes = string.gsub(g[2], 'w', '')
      local permits = tonumber(g[4] or '1')
      if g[4] then
        out[8] = out[8] + permits -- the permits of live holders only
      end
      out[#out + 1] = {owner, g[1], holds, host, pid, since, tonumber(holders[j + 1]) - now, writes,
        permits, '', g[5] and 0 or 1}
    end
  end
end
return out
