-- acquire.lua: take a mutex, or add a hold to it if this owner already has it.
--
-- The lock is a hash:
--   owner  the owner id (128 random bits per acquisition, hex)
--   token  the fencing token minted when this owner took the lock
--   holds  how many holds (reentrant acquisitions) the owner has
--   host, pid, since  who holds it, for inspection (since: its wall clock, ms)
--   h:<owner>:<id>  one field per hold, so that a retried release can
--          never remove the same hold twice
--
-- KEYS[1]  the lock hash          {name}
-- KEYS[2]  the fencing counter    {name}:fence (an integer)
-- KEYS[3]  the abandonment mark of this owner  {name}:abandoned:<owner>
--          (see abandon.lua): while it exists, this owner never takes the
--          lock, so an acquisition that reaches Redis after its attempt
--          was given up takes nothing
-- ARGV[1]  owner id
-- ARGV[2]  hold id (unique within the owner)
-- ARGV[3]  lease in ms
-- ARGV[4]  how long the fencing counter outlives its last use, in ms
-- ARGV[5]  host name of the holder
-- ARGV[6]  process id of the holder
-- ARGV[7]  '1' to re-enter only: never take a free lock (the owner's
--          earlier hold must still be there)
-- ARGV[8]  the holder's wall clock in ms, for inspection only
--
-- Returns {1, token, holds} when the owner holds the lock after the call,
-- or {0, pttl} with the current holder's remaining lease in ms.
--
-- Fencing tokens: the counter is incremented on every acquisition; when it
-- does not exist (first use, or it expired after ARGV[4] unused, or the data
-- was lost) it starts at the server time in microseconds. Each acquisition
-- takes more than a microsecond of server time, so a counter never runs
-- ahead of the clock, and a new counter starts above every token an earlier
-- one issued (unless the server clock went back). So the counter can expire
-- and no key leaks.

local owner = redis.call('HGET', KEYS[1], 'owner')

if owner == false and ARGV[7] ~= '1' then
  if redis.call('GET', KEYS[3]) then
    return {0, -2}
  end
  local token = redis.call('INCR', KEYS[2])
  if token == 1 then
    local t = redis.call('TIME')
    token = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
    redis.call('SET', KEYS[2], token, 'PX', ARGV[4])
  else
    -- A Lua number holds integers exactly up to 2^53 (tokens are about
    -- 2^51 today), but turns into '1.7e+15' as a command argument: format
    -- it as an integer.
    token = string.format('%d', token)
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
  end
  redis.call('HSET', KEYS[1],
    'owner', ARGV[1], 'token', token, 'holds', 1,
    'host', ARGV[5], 'pid', ARGV[6], 'since', ARGV[8],
    'h:' .. ARGV[1] .. ':' .. ARGV[2], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, token, 1}
end

if owner == ARGV[1] then
  -- Re-entry. The lease is left alone: the first hold's renewal owns it.
  local holds
  if redis.call('HSETNX', KEYS[1], 'h:' .. ARGV[1] .. ':' .. ARGV[2], 1) == 1 then
    holds = redis.call('HINCRBY', KEYS[1], 'holds', 1)
  else
    holds = tonumber(redis.call('HGET', KEYS[1], 'holds'))
  end
  return {1, redis.call('HGET', KEYS[1], 'token'), holds}
end

return {0, redis.call('PTTL', KEYS[1])}
