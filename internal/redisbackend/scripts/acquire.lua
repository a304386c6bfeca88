-- acquire.lua: take a mutex, or add a hold to it if this owner already has it.
--
-- The lock is a hash:
--   owner  the owner id (128 random bits per acquisition, hex)
--   token  the fencing token minted when this owner took the lock
--   holds  how many holds (reentrant acquisitions) the owner has
--   host, pid, since  who holds it, for inspection (since = server ms)
--   h:<id> one field per hold, so that a retried release can never
--          remove the same hold twice
--
-- KEYS[1]  the lock hash          {name}
-- KEYS[2]  the fencing counter    {name}:fence
-- ARGV[1]  owner id
-- ARGV[2]  hold id (unique within the owner)
-- ARGV[3]  lease in ms
-- ARGV[4]  how long the fencing counter outlives its last use, in ms
-- ARGV[5]  host name of the holder
-- ARGV[6]  process id of the holder
-- ARGV[7]  '1' to re-enter only: never take a free lock (the owner's
--          earlier hold must still be there)
--
-- Returns {1, token, holds} when the owner holds the lock after the call,
-- or {0, pttl} with the current holder's remaining lease in ms.
--
-- Fencing tokens are a hybrid clock: max(server time in microseconds,
-- last token + 1). The counter key keeps them strictly increasing while it
-- lives (even if the server clock steps back by less than its lifetime);
-- once it has expired, the server clock alone keeps new tokens above every
-- token it ever issued. So the counter can expire and no key leaks.

local owner = redis.call('HGET', KEYS[1], 'owner')

if owner == false and ARGV[7] ~= '1' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local token = now
  local last = tonumber(redis.call('GET', KEYS[2]))
  if last ~= nil and token <= last then
    token = last + 1
  end
  -- %.0f prints the integer exactly: tokens stay below 2^53.
  local tok = string.format('%.0f', token)
  redis.call('SET', KEYS[2], tok, 'PX', ARGV[4])
  redis.call('HSET', KEYS[1],
    'owner', ARGV[1], 'token', tok, 'holds', 1,
    'host', ARGV[5], 'pid', ARGV[6],
    'since', string.format('%.0f', math.floor(now / 1000)),
    'h:' .. ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, tok, 1}
end

if owner == ARGV[1] then
  -- Re-entry. The lease is left alone: the first hold's renewal owns it.
  local holds
  if redis.call('HSETNX', KEYS[1], 'h:' .. ARGV[2], 1) == 1 then
    holds = redis.call('HINCRBY', KEYS[1], 'holds', 1)
  else
    holds = tonumber(redis.call('HGET', KEYS[1], 'holds'))
  end
  return {1, redis.call('HGET', KEYS[1], 'token'), holds}
end

return {0, redis.call('PTTL', KEYS[1])}
